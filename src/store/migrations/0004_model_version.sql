DROP INDEX "signal_history_asset_changed_at";--> statement-breakpoint
ALTER TABLE "signal_history" ADD COLUMN "model_version" text DEFAULT 'signals-v1' NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX "signal_history_asset_model_changed_at" ON "signal_history" USING btree ("asset","model_version","changed_at");