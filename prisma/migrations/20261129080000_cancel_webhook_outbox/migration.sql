-- A cancel's completed webhook goes through the same outbox as completion events, so a gateway that
-- dies between the cancel's commit and queuing the webhook leaves it to the outbox sweeper. Such a
-- row broadcasts no event: a cancelled generation emits none.
ALTER TABLE "generation_events" ADD COLUMN "broadcast" BOOLEAN NOT NULL DEFAULT true;
