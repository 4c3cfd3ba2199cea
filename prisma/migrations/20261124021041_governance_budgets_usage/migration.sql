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
ADD COLUMN     "endpoint" TEXT,
ADD COLUMN     "images" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "input_tokens" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "model" TEXT,
ADD COLUMN     "output_tokens" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "video_seconds" DECIMAL(12,3) NOT NULL DEFAULT 0;

-- AlterTable
ALTER TABLE "namespaces" ADD COLUMN     "max_concurrent" INTEGER;

-- CreateTable
CREATE TABLE "usage_daily" (
    "id" UUID NOT NULL,
    "namespace_id" UUID NOT NULL,
    "day" DATE NOT NULL,
    "api_key_id" UUID,
    "model" TEXT,
    "endpoint" TEXT,
    "requests" INTEGER NOT NULL,
    "input_tokens" BIGINT NOT NULL,
    "output_tokens" BIGINT NOT NULL,
    "images" BIGINT NOT NULL,
    "video_seconds" DECIMAL(16,3) NOT NULL,
    "charged" DECIMAL(20,6) NOT NULL,

    CONSTRAINT "usage_daily_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "usage_rollup_days" (
    "namespace_id" UUID NOT NULL,
    "day" DATE NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "usage_rollup_days_pkey" PRIMARY KEY ("namespace_id","day")
);

-- CreateIndex
CREATE INDEX "usage_daily_namespace_id_day_idx" ON "usage_daily"("namespace_id", "day");

-- CreateIndex
CREATE INDEX "credit_reservations_namespace_id_closed_at_idx" ON "credit_reservations"("namespace_id", "closed_at");

-- AddForeignKey
ALTER TABLE "usage_daily" ADD CONSTRAINT "usage_daily_namespace_id_fkey" FOREIGN KEY ("namespace_id") REFERENCES "namespaces"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "usage_rollup_days" ADD CONSTRAINT "usage_rollup_days_namespace_id_fkey" FOREIGN KEY ("namespace_id") REFERENCES "namespaces"("id") ON DELETE CASCADE ON UPDATE CASCADE;
