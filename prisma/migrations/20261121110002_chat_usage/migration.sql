-- CreateEnum
CREATE TYPE "ChatUsageStatus" AS ENUM ('succeeded', 'failed', 'cancelled');

-- CreateTable
CREATE TABLE "chat_usage" (
    "id" TEXT NOT NULL,
    "namespace_id" UUID NOT NULL,
    "user_id" UUID NOT NULL,
    "model" TEXT NOT NULL,
    "provider" TEXT,
    "stream" BOOLEAN NOT NULL,
    "status" "ChatUsageStatus" NOT NULL,
    "prompt_tokens" INTEGER NOT NULL,
    "completion_tokens" INTEGER NOT NULL,
    "cost" DECIMAL(20,6) NOT NULL,
    "reservation_id" UUID,
    "request_id" TEXT,
    "error_message" TEXT,
    "duration_ms" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "chat_usage_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "chat_usage_namespace_id_created_at_idx" ON "chat_usage"("namespace_id", "created_at");

-- AddForeignKey
ALTER TABLE "chat_usage" ADD CONSTRAINT "chat_usage_namespace_id_fkey" FOREIGN KEY ("namespace_id") REFERENCES "namespaces"("id") ON DELETE CASCADE ON UPDATE CASCADE;
