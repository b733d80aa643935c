CREATE TABLE "market_revision" (
	"id" integer PRIMARY KEY DEFAULT 1 NOT NULL,
	"store_id" uuid DEFAULT gen_random_uuid() NOT NULL,
	"revision" bigint DEFAULT 0 NOT NULL,
	"token" uuid DEFAULT gen_random_uuid() NOT NULL,
	CONSTRAINT "market_revision_one_row" CHECK ("market_revision"."id" = 1)
);
--> statement-breakpoint
INSERT INTO "market_revision" DEFAULT VALUES;--> statement-breakpoint
CREATE FUNCTION "market_revision_bump"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Only where the market data cache is used (the embedded database sets market_cache.revision
  -- in its postgresql.conf): on PostgreSQL, concurrent writers must not queue on this row.
  IF current_setting('market_cache.revision', true) IS DISTINCT FROM 'on' THEN
    RETURN NULL;
  END IF;
  UPDATE "market_revision" SET "revision" = "revision" + 1, "token" = gen_random_uuid() WHERE "id" = 1;
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE TRIGGER "market_series_revision" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "market_series" FOR EACH STATEMENT EXECUTE FUNCTION "market_revision_bump"();--> statement-breakpoint
CREATE TRIGGER "market_candles_revision" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "market_candles" FOR EACH STATEMENT EXECUTE FUNCTION "market_revision_bump"();--> statement-breakpoint
CREATE TRIGGER "market_fear_greed_revision" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "market_fear_greed" FOR EACH STATEMENT EXECUTE FUNCTION "market_revision_bump"();--> statement-breakpoint
CREATE TRIGGER "market_funding_revision" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "market_funding" FOR EACH STATEMENT EXECUTE FUNCTION "market_revision_bump"();--> statement-breakpoint
CREATE TRIGGER "market_chain_metrics_revision" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "market_chain_metrics" FOR EACH STATEMENT EXECUTE FUNCTION "market_revision_bump"();
