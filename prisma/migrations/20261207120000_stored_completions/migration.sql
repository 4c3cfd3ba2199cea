-- Stored completions, feedback metrics and feedback (the learning loop; libs/chat/src/stored-completions).
ALTER TABLE "namespaces" ADD COLUMN "capture_rate" DOUBLE PRECISION;
ALTER TABLE "api_keys" ADD COLUMN "store_refused" BOOLEAN NOT NULL DEFAULT false;

CREATE TABLE "stored_completions" (
  "id" TEXT NOT NULL,
  "namespace_id" UUID NOT NULL,
  "user_id" UUID NOT NULL,
  "model" TEXT NOT NULL,
  "metadata" JSONB NOT NULL DEFAULT '{}',
  "messages" JSONB NOT NULL,
  "request" JSONB NOT NULL,
  "completion" JSONB NOT NULL,
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  "expires_at" TIMESTAMPTZ(3) NOT NULL,
  CONSTRAINT "stored_completions_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "stored_completions_namespace_id_fkey" FOREIGN KEY ("namespace_id") REFERENCES "namespaces"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
-- A namespace's list, newest first, paged by id.
CREATE INDEX "stored_completions_namespace_id_created_at_id_idx" ON "stored_completions"("namespace_id", "created_at" DESC, "id");
-- The expiry sweep.
CREATE INDEX "stored_completions_expires_at_idx" ON "stored_completions"("expires_at");

CREATE TABLE "feedback_metrics" (
  "id" UUID NOT NULL,
  "namespace_id" UUID NOT NULL,
  "name" TEXT NOT NULL,
  "type" TEXT NOT NULL,
  "optimize" TEXT NOT NULL,
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "feedback_metrics_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "feedback_metrics_namespace_id_fkey" FOREIGN KEY ("namespace_id") REFERENCES "namespaces"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE UNIQUE INDEX "feedback_metrics_namespace_id_name_key" ON "feedback_metrics"("namespace_id", "name");

CREATE TABLE "feedback" (
  "id" UUID NOT NULL,
  "metric_id" UUID NOT NULL,
  "completion_id" TEXT,
  "target_id" TEXT NOT NULL,
  "value" DOUBLE PRECISION NOT NULL,
  "comment" TEXT,
  "user_id" UUID NOT NULL,
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "feedback_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "feedback_metric_id_fkey" FOREIGN KEY ("metric_id") REFERENCES "feedback_metrics"("id") ON DELETE CASCADE ON UPDATE CASCADE,
  CONSTRAINT "feedback_completion_id_fkey" FOREIGN KEY ("completion_id") REFERENCES "stored_completions"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
-- A completion's feedback, oldest first.
CREATE INDEX "feedback_completion_id_created_at_idx" ON "feedback"("completion_id", "created_at");
-- Completions filtered by a metric's value.
CREATE INDEX "feedback_metric_id_value_idx" ON "feedback"("metric_id", "value");
CREATE INDEX "feedback_target_id_idx" ON "feedback"("target_id");
