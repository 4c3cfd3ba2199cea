-- AlterTable
ALTER TABLE "api_keys" ADD COLUMN     "rpm" INTEGER;

-- AlterTable
ALTER TABLE "namespaces" ADD COLUMN     "rpm" INTEGER;
