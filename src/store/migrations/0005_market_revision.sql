CREATE TABLE "market_revision" (
	"id" integer PRIMARY KEY DEFAULT 1 NOT NULL,
	"store_id" uuid DEFAULT gen_random_uuid() NOT NULL,
	"revision" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "market_revision_one_row" CHECK ("market_revision"."id" = 1)
);
--> statement-breakpoint
INSERT INTO "market_revision" DEFAULT VALUES;--> statement-breakpoint
CREATE FUNCTION "market_revision_bump"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE "market_revision" SET "revision" = "revision" + 1 WHERE "id" = 1;
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE TRIGGER "market_series_revision" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "market_series" FOR EACH STATEMENT EXECUTE FUNCTION "market_revision_bump"();--> statement-breakpoint
CREATE TRIGGER "market_candles_revision" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "market_candles" FOR EACH STATEMENT EXECUTE FUNCTION "market_revision_bump"();--> statement-breakpoint
CREATE TRIGGER "market_fear_greed_revision" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "market_fear_greed" FOR EACH STATEMENT EXECUTE FUNCTION "market_revision_bump"();--> statement-breakpoint
CREATE TRIGGER "market_funding_revision" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "market_funding" FOR EACH STATEMENT EXECUTE FUNCTION "market_revision_bump"();--> statement-breakpoint
CREATE TRIGGER "market_chain_metrics_revision" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "market_chain_metrics" FOR EACH STATEMENT EXECUTE FUNCTION "market_revision_bump"();
