-- AlterTable
ALTER TABLE "api_keys" ADD COLUMN     "budget_max_spend" DECIMAL(20,6),
ADD COLUMN     "budget_period" TEXT,
ADD COLUMN     "budget_reserved" DECIMAL(20,6) NOT NULL DEFAULT 0,
ADD COLUMN     "budget_spent" DECIMAL(20,6) NOT NULL DEFAULT 0,
ADD COLUMN     "budget_window" TEXT,
ADD COLUMN     "max_concurrent" INTEGER;

-- AlterTable
ALTER TABLE "credit_reservations" ADD COLUMN     "api_key_id" UUID,
ADD COLUMN     "budget_hold" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN     "closed_day" DATE,
ADD COLUMN     "endpoint" TEXT,
ADD COLUMN     "images" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "input_tokens" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "model" TEXT,
ADD COLUMN     "output_tokens" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "video_seconds" DECIMAL(12,3) NOT NULL DEFAULT 0;

-- AlterTable
ALTER TABLE "namespaces" ADD COLUMN     "max_concurrent" INTEGER;

-- CreateIndex
CREATE INDEX "credit_reservations_namespace_id_closed_at_idx" ON "credit_reservations"("namespace_id", "closed_at");
