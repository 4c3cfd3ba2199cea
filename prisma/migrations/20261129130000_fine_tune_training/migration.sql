-- Fine-tunes that train and serve (issue 69): the run's money and times, trainers and their
-- leases, what trainers report, checkpoints and deployed models.
ALTER TABLE "fine_tunes"
  ADD COLUMN "run_requested" BOOLEAN NOT NULL DEFAULT false,
  ADD COLUMN "reservation_id" UUID,
  ADD COLUMN "credits_used" DECIMAL(20,6),
  ADD COLUMN "trained_tokens" BIGINT,
  ADD COLUMN "trained_steps" INTEGER,
  ADD COLUMN "attempt" INTEGER NOT NULL DEFAULT 0,
  ADD COLUMN "stop_requested_at" TIMESTAMPTZ(3),
  ADD COLUMN "started_at" TIMESTAMPTZ(3),
  ADD COLUMN "finished_at" TIMESTAMPTZ(3),
  ADD COLUMN "enqueued_at" TIMESTAMPTZ(3);
CREATE INDEX "fine_tunes_state_enqueued_at_idx" ON "fine_tunes"("state", "enqueued_at");

CREATE TABLE "trainers" (
  "id" UUID NOT NULL,
  "name" TEXT NOT NULL,
  "base_models" TEXT[],
  "token_hash" TEXT NOT NULL,
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  "revoked_at" TIMESTAMPTZ(3),
  CONSTRAINT "trainers_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "trainers_token_hash_key" ON "trainers"("token_hash");

CREATE TABLE "fine_tune_leases" (
  "id" UUID NOT NULL,
  "fine_tune_id" UUID NOT NULL,
  "trainer_id" UUID NOT NULL,
  "attempt" INTEGER NOT NULL,
  "state" TEXT NOT NULL DEFAULT 'active',
  "active_for" UUID,
  "last_seq" INTEGER NOT NULL DEFAULT 0,
  "heartbeat_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "fine_tune_leases_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "fine_tune_leases_fine_tune_id_fkey" FOREIGN KEY ("fine_tune_id") REFERENCES "fine_tunes"("id") ON DELETE CASCADE ON UPDATE CASCADE,
  CONSTRAINT "fine_tune_leases_trainer_id_fkey" FOREIGN KEY ("trainer_id") REFERENCES "trainers"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE INDEX "fine_tune_leases_fine_tune_id_idx" ON "fine_tune_leases"("fine_tune_id");
CREATE INDEX "fine_tune_leases_state_heartbeat_at_idx" ON "fine_tune_leases"("state", "heartbeat_at");
-- One run of a fine-tune at a time, whatever the replicas and trainers do.
CREATE UNIQUE INDEX "fine_tune_leases_active_for_key" ON "fine_tune_leases"("active_for");

CREATE TABLE "fine_tune_logs" (
  "id" BIGSERIAL NOT NULL,
  "fine_tune_id" UUID NOT NULL,
  "attempt" INTEGER NOT NULL,
  "type" TEXT NOT NULL,
  "data" JSONB NOT NULL,
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "fine_tune_logs_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "fine_tune_logs_fine_tune_id_fkey" FOREIGN KEY ("fine_tune_id") REFERENCES "fine_tunes"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE INDEX "fine_tune_logs_fine_tune_id_id_idx" ON "fine_tune_logs"("fine_tune_id", "id");

CREATE TABLE "fine_tune_checkpoints" (
  "fine_tune_id" UUID NOT NULL,
  "step" INTEGER NOT NULL,
  "metrics" JSONB NOT NULL,
  "size_bytes" BIGINT NOT NULL,
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "fine_tune_checkpoints_pkey" PRIMARY KEY ("fine_tune_id", "step"),
  CONSTRAINT "fine_tune_checkpoints_fine_tune_id_fkey" FOREIGN KEY ("fine_tune_id") REFERENCES "fine_tunes"("id") ON DELETE CASCADE ON UPDATE CASCADE
);

CREATE TABLE "fine_tune_checkpoint_files" (
  "fine_tune_id" UUID NOT NULL,
  "step" INTEGER NOT NULL,
  "path" TEXT NOT NULL,
  "blob_key" TEXT NOT NULL,
  "size_bytes" BIGINT NOT NULL,
  "sha256" TEXT NOT NULL,
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "fine_tune_checkpoint_files_pkey" PRIMARY KEY ("fine_tune_id", "step", "path"),
  CONSTRAINT "fine_tune_checkpoint_files_fine_tune_id_fkey" FOREIGN KEY ("fine_tune_id") REFERENCES "fine_tunes"("id") ON DELETE CASCADE ON UPDATE CASCADE
);

CREATE TABLE "deployed_models" (
  "id" UUID NOT NULL,
  "namespace_id" UUID NOT NULL,
  "name" TEXT NOT NULL,
  "fine_tune_id" UUID NOT NULL,
  "step" INTEGER NOT NULL,
  "base_model" TEXT NOT NULL,
  "deployment_type" TEXT NOT NULL,
  "status" TEXT NOT NULL,
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  "updated_at" TIMESTAMPTZ(3) NOT NULL,
  CONSTRAINT "deployed_models_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "deployed_models_fine_tune_id_fkey" FOREIGN KEY ("fine_tune_id") REFERENCES "fine_tunes"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE UNIQUE INDEX "deployed_models_namespace_id_name_key" ON "deployed_models"("namespace_id", "name");
CREATE UNIQUE INDEX "deployed_models_fine_tune_id_step_key" ON "deployed_models"("fine_tune_id", "step");
