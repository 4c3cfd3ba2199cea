-- Queued exports of stored completions (libs/chat/src/stored-completions/export-completions.use-case.ts).
CREATE TABLE "completion_exports" (
  "id" UUID NOT NULL,
  "namespace_id" UUID NOT NULL,
  "user_id" UUID NOT NULL,
  "username" TEXT NOT NULL,
  "repo" TEXT NOT NULL,
  "path" TEXT NOT NULL,
  "branch" TEXT NOT NULL,
  "filter" JSONB NOT NULL,
  "status" TEXT NOT NULL,
  "total" INTEGER NOT NULL,
  "rows" INTEGER NOT NULL DEFAULT 0,
  "skipped" INTEGER NOT NULL DEFAULT 0,
  "commit" JSONB,
  "error" TEXT,
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  "started_at" TIMESTAMPTZ(3),
  "ended_at" TIMESTAMPTZ(3),
  "event_published_at" TIMESTAMPTZ(3),
  CONSTRAINT "completion_exports_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "completion_exports_namespace_id_fkey" FOREIGN KEY ("namespace_id") REFERENCES "namespaces"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
