-- OpenAI's Batch API: batches of a namespace and their lines (libs/batch).
CREATE TABLE "batches" (
  "id" UUID NOT NULL,
  "namespace_id" UUID NOT NULL,
  "user_id" UUID NOT NULL,
  "api_key_id" UUID,
  "key_prefix" TEXT NOT NULL,
  "has_budget" BOOLEAN NOT NULL DEFAULT false,
  "endpoint" TEXT NOT NULL,
  "input_file_id" UUID NOT NULL,
  "completion_window" TEXT NOT NULL,
  "status" TEXT NOT NULL,
  "metadata" JSONB,
  "errors" JSONB,
  "output_file_id" UUID,
  "error_file_id" UUID,
  "output_expires_after" INTEGER,
  "request_id" TEXT NOT NULL,
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  "expires_at" TIMESTAMPTZ(3) NOT NULL,
  "in_progress_at" TIMESTAMPTZ(3),
  "finalizing_at" TIMESTAMPTZ(3),
  "completed_at" TIMESTAMPTZ(3),
  "failed_at" TIMESTAMPTZ(3),
  "expired_at" TIMESTAMPTZ(3),
  "cancelling_at" TIMESTAMPTZ(3),
  "cancelled_at" TIMESTAMPTZ(3),
  CONSTRAINT "batches_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "batches_namespace_id_fkey" FOREIGN KEY ("namespace_id") REFERENCES "namespaces"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
-- A namespace's batches newest first (GET /api/ai/batches and its cursor).
CREATE INDEX "batches_namespace_id_created_at_id_idx" ON "batches"("namespace_id", "created_at" DESC, "id");
-- The sweep's expired batches.
CREATE INDEX "batches_status_expires_at_idx" ON "batches"("status", "expires_at");

CREATE TABLE "batch_lines" (
  "id" UUID NOT NULL,
  "batch_id" UUID NOT NULL,
  "line_no" INTEGER NOT NULL,
  "custom_id" TEXT NOT NULL,
  "model" TEXT NOT NULL,
  "body" JSONB NOT NULL,
  "status" TEXT NOT NULL DEFAULT 'pending',
  "reservation_id" UUID NOT NULL,
  "attempts" INTEGER NOT NULL DEFAULT 0,
  "response" JSONB,
  "error" JSONB,
  "input_tokens" INTEGER NOT NULL DEFAULT 0,
  "output_tokens" INTEGER NOT NULL DEFAULT 0,
  "started_at" TIMESTAMPTZ(3),
  "ended_at" TIMESTAMPTZ(3),
  CONSTRAINT "batch_lines_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "batch_lines_batch_id_fkey" FOREIGN KEY ("batch_id") REFERENCES "batches"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE UNIQUE INDEX "batch_lines_batch_id_line_no_key" ON "batch_lines"("batch_id", "line_no");
-- request_counts and the lines left to run.
CREATE INDEX "batch_lines_batch_id_status_idx" ON "batch_lines"("batch_id", "status");
-- The stale-reservation sweep asks which reservations a live line still owns.
CREATE INDEX "batch_lines_reservation_id_idx" ON "batch_lines"("reservation_id");
