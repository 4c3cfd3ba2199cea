-- AlterTable
ALTER TABLE "fine_tunes" ADD COLUMN     "name" TEXT NOT NULL DEFAULT '';

-- AlterTable
ALTER TABLE "repository_commits" ADD COLUMN     "changes" JSONB NOT NULL DEFAULT '[]';

-- CreateTable
CREATE TABLE "repository_branches" (
    "id" UUID NOT NULL,
    "repository_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "head_commit_id" UUID,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "repository_branches_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "repository_branches_repository_id_name_key" ON "repository_branches"("repository_id", "name");

-- CreateIndex
CREATE INDEX "fine_tunes_repository_id_state_created_at_idx" ON "fine_tunes"("repository_id", "state", "created_at");

-- AddForeignKey
ALTER TABLE "repository_branches" ADD CONSTRAINT "repository_branches_repository_id_fkey" FOREIGN KEY ("repository_id") REFERENCES "repositories"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Every repository has a main branch (repositories created before branches existed get one here).
INSERT INTO "repository_branches" ("id", "repository_id", "name", "updated_at")
SELECT gen_random_uuid(), "id", 'main', CURRENT_TIMESTAMP FROM "repositories";
