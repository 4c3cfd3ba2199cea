-- Credit reservations are found by id on the hot path (settle, release). An index leading with
-- status let the planner scan every "open" entry instead, dead ones included: every reservation
-- settled since the last vacuum, on every settle. The reference index served no query. The stale
-- reservation sweeper finds open reservations by age through a partial index on closed_at, which
-- is NULL exactly while a reservation is open and which the hot statements never filter on.
-- Building it takes a write lock on credit_reservations for as long as one scan of the table.

-- DropIndex
DROP INDEX "credit_reservations_namespace_id_status_idx";

-- DropIndex
DROP INDEX "credit_reservations_reference_idx";

-- CreateIndex
CREATE INDEX "credit_reservations_open_created_at_idx" ON "credit_reservations"("created_at") WHERE (closed_at IS NULL);
