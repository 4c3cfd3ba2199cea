-- AlterTable
ALTER TABLE "api_keys" ADD COLUMN     "tpm" INTEGER;

-- AlterTable
ALTER TABLE "namespaces" ADD COLUMN     "tpm" INTEGER;
