-- Fine-tune runs' webhooks (issue 69): the URL given to run, and their deliveries beside generations'.
ALTER TABLE "fine_tunes" ADD COLUMN "webhook_url" TEXT;
ALTER TABLE "webhook_deliveries" ALTER COLUMN "generation_id" DROP NOT NULL;
ALTER TABLE "webhook_deliveries" ADD COLUMN "fine_tune_id" UUID;
CREATE INDEX "webhook_deliveries_fine_tune_id_at_idx" ON "webhook_deliveries"("fine_tune_id", "at");
