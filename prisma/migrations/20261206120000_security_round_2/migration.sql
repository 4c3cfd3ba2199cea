-- Security round 2 (issue 81): the dataset a run was charged for is pinned at tokenization;
-- trainers can be bound to namespaces; the built-in trainer's row is marked (its token is random).
ALTER TABLE "fine_tunes" ADD COLUMN "dataset_blob_key" TEXT, ADD COLUMN "dataset_sha256" TEXT, ADD COLUMN "dataset_size" BIGINT;
ALTER TABLE "trainers" ADD COLUMN "namespace_ids" UUID[] NOT NULL DEFAULT ARRAY[]::UUID[], ADD COLUMN "builtin" BOOLEAN NOT NULL DEFAULT false;
-- The old built-in token was derived from URL_SIGNING_SECRET: whoever knows the secret holds it. Revoke it.
UPDATE "trainers" SET "revoked_at" = CURRENT_TIMESTAMP WHERE "name" = 'atelier-builtin' AND "revoked_at" IS NULL;
-- A stored response keeps its turn's new items once; the history is rebuilt from the chain, whose
-- total size is bounded.
ALTER TABLE "responses" ADD COLUMN "items_delta" BOOLEAN NOT NULL DEFAULT false, ADD COLUMN "chain_bytes" BIGINT NOT NULL DEFAULT 0;
CREATE INDEX "responses_previous_response_id_idx" ON "responses"("previous_response_id");
