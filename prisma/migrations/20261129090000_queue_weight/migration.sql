-- A namespace's share of queue workers relative to others while both wait (null: 1).
ALTER TABLE "namespaces" ADD COLUMN "queue_weight" INTEGER;
