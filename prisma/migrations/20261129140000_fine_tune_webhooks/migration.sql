-- Fine-tune runs' webhooks (issue 69): the URL given to run, and their deliveries beside generations'.
ALTER TABLE "fine_tunes" ADD COLUMN "webhook_url" TEXT;
ALTER TABLE "webhook_deliveries" ALTER COLUMN "generation_id" DROP NOT NULL;
ALTER TABLE "webhook_deliveries" ADD COLUMN "fine_tune_id" UUID;
CREATE INDEX "webhook_deliveries_fine_tune_id_at_idx" ON "webhook_deliveries"("fine_tune_id", "at");

-- The outbox of fine_tune.status events.
CREATE TABLE "fine_tune_events" (
  "id" BIGSERIAL NOT NULL,
  "fine_tune_id" UUID NOT NULL,
  "user_id" UUID NOT NULL,
  "data" JSONB NOT NULL,
  "webhook_url" TEXT,
  "webhook_id" TEXT,
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  "published_at" TIMESTAMPTZ(3),
  CONSTRAINT "fine_tune_events_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "fine_tune_events_fine_tune_id_fkey" FOREIGN KEY ("fine_tune_id") REFERENCES "fine_tunes"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE INDEX "fine_tune_events_fine_tune_id_id_idx" ON "fine_tune_events"("fine_tune_id", "id");
CREATE INDEX "fine_tune_events_published_at_created_at_idx" ON "fine_tune_events"("published_at", "created_at");
