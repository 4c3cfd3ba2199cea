/**
 * The two statements that move credits on the hot path. Both ledgers run exactly these (the
 * plain one with one call, the group-commit one with many), so there is one rule for each step.
 *
 * Lock order is always reservation rows, then the namespace row (release follows it too), so
 * concurrent statements cannot deadlock on each other.
 */

/**
 * Reserves calls in arrival order, each all-or-nothing: a call is accepted while the running
 * total of accepted calls fits what the namespace may spend (credits - reserved), read on the
 * namespace row this statement has locked. Returns the ids of the reservations it wrote.
 *
 * $1 namespace id, $2 reservation ids, $3 amounts, $4 references, $5 the call each item belongs to.
 */
export const RESERVE_SQL = `
  WITH req AS (
    SELECT r.id, r.amount, r.reference, r.call
    FROM unnest($2::uuid[], $3::numeric[], $4::text[], $5::int[]) AS r(id, amount, reference, call)
  ), calls AS (
    SELECT call, sum(amount) AS amount FROM req GROUP BY call
  ), ns AS (
    SELECT id, credits - reserved AS available FROM namespaces WHERE id = $1::uuid FOR UPDATE
  ), accepted AS (
    SELECT c.call
    FROM (SELECT calls.*, sum(calls.amount) OVER (ORDER BY calls.call) AS running FROM calls) c, ns
    WHERE c.running <= ns.available
  ), acc AS (
    SELECT req.id, req.amount, req.reference FROM req JOIN accepted USING (call)
  ), upd AS (
    UPDATE namespaces n SET reserved = n.reserved + (SELECT sum(amount) FROM acc)
    WHERE n.id = $1::uuid AND EXISTS (SELECT 1 FROM acc)
    RETURNING n.id
  )
  INSERT INTO credit_reservations (id, namespace_id, amount, reference, status)
  SELECT acc.id, upd.id, acc.amount, acc.reference, 'open' FROM acc, upd
  RETURNING id::text AS id`;

/**
 * The settle rule (README, "Credits"): a request is charged its actual cost. What the
 * reservation covers is always charged; a cost above it is charged as far as the namespace's
 * unreserved credits reach, in the order the settles were given, so a balance never goes
 * negative and never pays for more than was delivered. A negative cost charges nothing.
 *
 * Only reservations still `open` are settled, under their row locks: a retried or concurrent
 * settle (or release) of the same reservation finds nothing to do, so nothing is charged twice.
 * Returns one row per reservation it settled, with what it charged.
 *
 * $1 reservation ids, $2 actual costs (same order).
 */
export const SETTLE_SQL = `
  WITH req AS (
    SELECT r.id, r.actual, r.ord
    FROM unnest($1::uuid[], $2::numeric[]) WITH ORDINALITY AS r(id, actual, ord)
  ), cur AS (
    SELECT c.id AS rid, c.namespace_id, c.amount, GREATEST(req.actual, 0) AS actual, req.ord
    FROM credit_reservations c JOIN req ON req.id = c.id
    WHERE c.status = 'open'
    FOR UPDATE OF c
  ), ns AS (
    SELECT n.id, GREATEST(n.credits - n.reserved, 0) AS free
    FROM namespaces n WHERE n.id IN (SELECT namespace_id FROM cur)
    FOR UPDATE
  ), beyond AS (
    SELECT cur.*, ns.free, GREATEST(cur.actual - cur.amount, 0) AS excess,
           sum(GREATEST(cur.actual - cur.amount, 0)) OVER (PARTITION BY cur.namespace_id ORDER BY cur.ord) AS excess_so_far
    FROM cur JOIN ns ON ns.id = cur.namespace_id
  ), priced AS (
    SELECT rid, namespace_id, amount, ord,
           LEAST(actual, amount) + LEAST(excess_so_far, free) - LEAST(excess_so_far - excess, free) AS charge
    FROM beyond
  ), closed AS (
    UPDATE credit_reservations c SET status = 'settled', closed_at = now(), charged = priced.charge
    FROM priced WHERE c.id = priced.rid
    RETURNING c.id
  ), upd AS (
    UPDATE namespaces n SET reserved = n.reserved - t.amount, credits = n.credits - t.charge
    FROM (SELECT namespace_id, sum(amount) AS amount, sum(charge) AS charge FROM priced GROUP BY namespace_id) t
    WHERE n.id = t.namespace_id
    RETURNING n.id, n.credits
  )
  INSERT INTO credit_ledger (id, namespace_id, kind, amount, balance_after, reservation_id)
  SELECT gen_random_uuid(), w.namespace_id, 'charge'::"LedgerKind", -w.charge, upd.credits + (w.total - w.running), w.rid
  FROM (
    SELECT rid, namespace_id, charge,
           sum(charge) OVER (PARTITION BY namespace_id ORDER BY ord) AS running,
           sum(charge) OVER (PARTITION BY namespace_id) AS total
    FROM priced
  ) w JOIN upd ON upd.id = w.namespace_id
  RETURNING reservation_id::text AS id, (-amount)::text AS charged`;
