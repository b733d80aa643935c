DROP INDEX "theses_user_id";--> statement-breakpoint
CREATE INDEX "theses_user_created" ON "theses" USING btree ("user_id","created_at" DESC NULLS FIRST,"id" DESC NULLS FIRST);