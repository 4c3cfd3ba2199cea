-- Experiments: a model id of a namespace split between variants (libs/chat/src/experiments).
CREATE TABLE "experiments" (
  "id" UUID NOT NULL,
  "namespace_id" UUID NOT NULL,
  "name" TEXT NOT NULL,
  "mode" TEXT NOT NULL,
  "metric_id" UUID,
  "sticky_by" TEXT,
  "min_weight" DOUBLE PRECISION NOT NULL,
  "variants" JSONB NOT NULL,
  "status" TEXT NOT NULL,
  "promoted_model" TEXT,
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "experiments_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "experiments_namespace_id_fkey" FOREIGN KEY ("namespace_id") REFERENCES "namespaces"("id") ON DELETE CASCADE ON UPDATE CASCADE,
  CONSTRAINT "experiments_metric_id_fkey" FOREIGN KEY ("metric_id") REFERENCES "feedback_metrics"("id") ON DELETE RESTRICT ON UPDATE CASCADE
);
CREATE UNIQUE INDEX "experiments_namespace_id_name_key" ON "experiments"("namespace_id", "name");

CREATE TABLE "experiment_requests" (
  "id" UUID NOT NULL,
  "experiment_id" UUID NOT NULL,
  "variant" TEXT NOT NULL,
  "completion_id" TEXT NOT NULL,
  "outcome" TEXT NOT NULL,
  "duration_ms" INTEGER NOT NULL,
  "cost" DECIMAL(20,6),
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "experiment_requests_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "experiment_requests_experiment_id_fkey" FOREIGN KEY ("experiment_id") REFERENCES "experiments"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
-- A variant's statistics.
CREATE INDEX "experiment_requests_experiment_id_variant_idx" ON "experiment_requests"("experiment_id", "variant");
-- Feedback on an answer finds its experiment.
CREATE INDEX "experiment_requests_completion_id_idx" ON "experiment_requests"("completion_id");

CREATE TABLE "experiment_events" (
  "id" UUID NOT NULL,
  "experiment_id" UUID NOT NULL,
  "kind" TEXT NOT NULL,
  "variants" JSONB NOT NULL,
  "model" TEXT,
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "experiment_events_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "experiment_events_experiment_id_fkey" FOREIGN KEY ("experiment_id") REFERENCES "experiments"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE INDEX "experiment_events_experiment_id_created_at_idx" ON "experiment_events"("experiment_id", "created_at");
