-- CreateTable
CREATE TABLE "generation_events" (
    "generation_id" UUID NOT NULL,
    "user_id" UUID NOT NULL,
    "payload" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "published_at" TIMESTAMPTZ(3),

    CONSTRAINT "generation_events_pkey" PRIMARY KEY ("generation_id")
);

-- CreateIndex
CREATE INDEX "generation_events_published_at_created_at_idx" ON "generation_events"("published_at", "created_at");
