-- A batch's webhook, and the outbox of its batch.status events (libs/batch).
ALTER TABLE "batches" ADD COLUMN "webhook_url" TEXT;

CREATE TABLE "batch_events" (
  "id" BIGSERIAL NOT NULL,
  "batch_id" UUID NOT NULL,
  "user_id" UUID NOT NULL,
  "data" JSONB NOT NULL,
  "webhook_url" TEXT,
  "webhook_id" TEXT,
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  "published_at" TIMESTAMPTZ(3),
  CONSTRAINT "batch_events_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "batch_events_batch_id_fkey" FOREIGN KEY ("batch_id") REFERENCES "batches"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
-- A batch's unpublished events in order.
CREATE INDEX "batch_events_batch_id_id_idx" ON "batch_events"("batch_id", "id");
-- The sweep's stranded events.
CREATE INDEX "batch_events_published_at_created_at_idx" ON "batch_events"("published_at", "created_at");
