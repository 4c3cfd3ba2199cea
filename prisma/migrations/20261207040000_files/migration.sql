-- OpenAI's Files API (batch input): a namespace's uploaded files; their bytes are in the blob store.
CREATE TABLE "files" (
  "id" UUID NOT NULL,
  "namespace_id" UUID NOT NULL,
  "user_id" UUID NOT NULL,
  "filename" TEXT NOT NULL,
  "purpose" TEXT NOT NULL,
  "bytes" BIGINT NOT NULL,
  "sha256" TEXT NOT NULL,
  "blob_key" TEXT NOT NULL,
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  "expires_at" TIMESTAMPTZ(3),
  CONSTRAINT "files_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "files_namespace_id_fkey" FOREIGN KEY ("namespace_id") REFERENCES "namespaces"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
-- A namespace's files newest first (GET /api/ai/files and its cursor).
CREATE INDEX "files_namespace_id_created_at_id_idx" ON "files"("namespace_id", "created_at" DESC, "id");
