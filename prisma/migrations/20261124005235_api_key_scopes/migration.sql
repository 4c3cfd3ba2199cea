-- AlterTable
ALTER TABLE "api_keys" ADD COLUMN     "expires_at" TIMESTAMPTZ(3),
ADD COLUMN     "name" TEXT,
ADD COLUMN     "namespace_id" UUID,
ADD COLUMN     "scopes" TEXT[] DEFAULT ARRAY[]::TEXT[];
