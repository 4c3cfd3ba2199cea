-- Security round 2 (issue 81): the dataset a run was charged for is pinned at tokenization;
-- trainers can be bound to namespaces; the built-in trainer's row is marked (its token is random).
ALTER TABLE "fine_tunes" ADD COLUMN "dataset_blob_key" TEXT, ADD COLUMN "dataset_sha256" TEXT, ADD COLUMN "dataset_size" BIGINT;
ALTER TABLE "trainers" ADD COLUMN "namespace_ids" UUID[] NOT NULL DEFAULT ARRAY[]::UUID[], ADD COLUMN "builtin" BOOLEAN NOT NULL DEFAULT false;
-- The old built-in token was derived from URL_SIGNING_SECRET: whoever knows the secret holds it. Revoke it.
UPDATE "trainers" SET "revoked_at" = CURRENT_TIMESTAMP WHERE "name" = 'atelier-builtin' AND "revoked_at" IS NULL;
