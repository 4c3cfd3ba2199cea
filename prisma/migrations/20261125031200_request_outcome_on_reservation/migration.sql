-- A chat request's record (provider, outcome, duration, error, ...) moves from its own chat_usage
-- row onto its credit reservation, written by the same statement that settles or releases it:
-- the record and the charge are one row, landing together or not at all (before, a crash between
-- the settle and the record's batched insert lost the record), and a paid request costs Postgres
-- one row insert fewer (with its two index entries and foreign-key check). chat_usage stays, as a
-- view in the table's former shape, so queries written against it keep working.

-- CreateEnum
CREATE TYPE "RequestOutcome" AS ENUM ('succeeded', 'failed', 'cancelled');

-- AlterTable
ALTER TABLE "credit_reservations" ADD COLUMN     "duration_ms" INTEGER,
ADD COLUMN     "error_message" TEXT,
ADD COLUMN     "outcome" "RequestOutcome",
ADD COLUMN     "provider" TEXT,
ADD COLUMN     "request_id" TEXT,
ADD COLUMN     "stream" BOOLEAN,
ADD COLUMN     "user_id" UUID;

-- Every chat_usage row was written for a reservation (reservation_id); each moves onto it.
UPDATE "credit_reservations" r
SET "outcome" = u."status"::text::"RequestOutcome", "user_id" = u."user_id", "provider" = u."provider", "stream" = u."stream",
    "request_id" = u."request_id", "error_message" = u."error_message", "duration_ms" = u."duration_ms"
FROM "chat_usage" u
WHERE u."reservation_id" = r."id";

-- A row without its reservation (none is written so, but the column allowed it) is kept as a
-- released reservation carrying its record, so no record is lost. Its cost is not carried over:
-- whatever was charged stays where the ledger has it, and usage reports do not count it twice.
INSERT INTO "credit_reservations" ("id", "namespace_id", "amount", "charged", "status", "reference", "created_at", "closed_at",
                                   "model", "endpoint", "input_tokens", "output_tokens", "outcome", "user_id", "provider", "stream",
                                   "request_id", "error_message", "duration_ms")
SELECT gen_random_uuid(), u."namespace_id", 0, 0, 'released', 'chat:' || u."id", u."created_at", u."created_at",
       u."model", '/api/ai/chat/completions', u."prompt_tokens", u."completion_tokens", u."status"::text::"RequestOutcome", u."user_id",
       u."provider", u."stream", u."request_id", u."error_message", u."duration_ms"
FROM "chat_usage" u
WHERE u."reservation_id" IS NULL OR NOT EXISTS (SELECT 1 FROM "credit_reservations" r WHERE r."id" = u."reservation_id");

-- DropTable
DROP TABLE "chat_usage";

-- DropEnum
DROP TYPE "ChatUsageStatus";

-- The former table's columns, one row per chat request that reported how it ended.
CREATE VIEW "chat_usage" AS
SELECT substr(r."reference", 6) AS "id", r."namespace_id", r."user_id", r."model", r."provider", r."stream", r."outcome" AS "status",
       r."input_tokens" AS "prompt_tokens", r."output_tokens" AS "completion_tokens", COALESCE(r."charged", 0) AS "cost",
       r."id" AS "reservation_id", r."request_id", r."error_message", r."duration_ms", r."created_at"
FROM "credit_reservations" r
WHERE starts_with(r."reference", 'chat:') AND r."outcome" IS NOT NULL;
