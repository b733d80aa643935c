CREATE TABLE "backfill_state" (
	"asset" text PRIMARY KEY NOT NULL,
	"through_date" date NOT NULL,
	"engine_version" text NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "signal_history" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"asset" text NOT NULL,
	"changed_at" date NOT NULL,
	"signal" text NOT NULL,
	"previous_signal" text,
	"score" double precision NOT NULL,
	"confidence" double precision NOT NULL,
	"price_usd" double precision NOT NULL,
	"factors" jsonb NOT NULL,
	"recorded_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "signal_snapshots" (
	"asset" text NOT NULL,
	"as_of" date NOT NULL,
	"signal" text NOT NULL,
	"score" double precision NOT NULL,
	"confidence" double precision NOT NULL,
	"price_usd" double precision NOT NULL,
	"payload" jsonb NOT NULL,
	"computed_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "signal_snapshots_asset_as_of_pk" PRIMARY KEY("asset","as_of")
);
--> statement-breakpoint
CREATE UNIQUE INDEX "signal_history_asset_changed_at" ON "signal_history" USING btree ("asset","changed_at");