CREATE TABLE "market_candles" (
	"asset" text NOT NULL,
	"date" date NOT NULL,
	"open" double precision NOT NULL,
	"high" double precision NOT NULL,
	"low" double precision NOT NULL,
	"close" double precision NOT NULL,
	"volume" double precision,
	"source" text NOT NULL,
	CONSTRAINT "market_candles_asset_date_pk" PRIMARY KEY("asset","date")
);
--> statement-breakpoint
CREATE TABLE "market_chain_metrics" (
	"chain" text NOT NULL,
	"metric" text NOT NULL,
	"date" date NOT NULL,
	"value" double precision NOT NULL,
	"source" text NOT NULL,
	CONSTRAINT "market_chain_metrics_chain_metric_date_pk" PRIMARY KEY("chain","metric","date")
);
--> statement-breakpoint
CREATE TABLE "market_fear_greed" (
	"date" date PRIMARY KEY NOT NULL,
	"value" integer NOT NULL,
	"classification" text NOT NULL,
	"source" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "market_funding" (
	"asset" text NOT NULL,
	"date" date NOT NULL,
	"rate" double precision NOT NULL,
	"interval_hours" integer,
	"prints" integer,
	"source" text NOT NULL,
	CONSTRAINT "market_funding_asset_date_pk" PRIMARY KEY("asset","date")
);
--> statement-breakpoint
CREATE TABLE "market_imports" (
	"name" text PRIMARY KEY NOT NULL,
	"fingerprint" text NOT NULL,
	"rows" integer NOT NULL,
	"imported_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "market_series" (
	"series" text PRIMARY KEY NOT NULL,
	"kind" text NOT NULL,
	"subject" text,
	"metric" text,
	"source" text NOT NULL,
	"origin" text NOT NULL,
	"cadence_hours" integer DEFAULT 24 NOT NULL,
	"newest_date" date,
	"last_success_at" timestamp with time zone,
	"last_error" text,
	"last_error_at" timestamp with time zone,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
