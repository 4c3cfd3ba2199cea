-- Priority within a namespace's own queued generations (issue 68).
CREATE TYPE "GenerationPriority" AS ENUM ('high', 'normal', 'low');
ALTER TABLE "generations" ADD COLUMN "priority" "GenerationPriority" NOT NULL DEFAULT 'normal';
