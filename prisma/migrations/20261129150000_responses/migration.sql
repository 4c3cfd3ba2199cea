-- The Responses API's stored answers (issue 70): previous_response_id, GET and input_items.
CREATE TABLE "responses" (
  "id" TEXT NOT NULL,
  "namespace_id" UUID NOT NULL,
  "user_id" UUID NOT NULL,
  "previous_response_id" TEXT,
  "response" JSONB NOT NULL,
  "input_items" JSONB NOT NULL,
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  "expires_at" TIMESTAMPTZ(3) NOT NULL,
  CONSTRAINT "responses_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "responses_namespace_id_fkey" FOREIGN KEY ("namespace_id") REFERENCES "namespaces"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE INDEX "responses_expires_at_idx" ON "responses"("expires_at");
