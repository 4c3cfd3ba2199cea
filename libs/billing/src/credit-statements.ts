/**
 * The statements that move credits on the hot path. Both ledgers run exactly these (the plain
 * one with one call, the group-commit one with many), so there is one rule for each step.
 * Reserve and settle each have a statement for a batch and a cheaper one for a single call
 * (the case whenever calls do not overlap); credit-statements.spec.ts runs both on the same
 * cases and requires the same answers and the same rows afterwards.
 *
 * Lock order is always reservation rows, then the namespace row, then the API key row (release
 * follows it too), so concurrent statements cannot deadlock on each other.
 */

/**
 * The budget period a key's spend counts in now, from its `budget_period`: the UTC calendar day
 * or month, or "total". Computed by Postgres (one clock for every replica); a key whose
 * `budget_window` differs has not spent anything in this period yet.
 */
const budgetWindow = (table: string) =>
  `to_char(now() AT TIME ZONE 'UTC', CASE ${table}.budget_period WHEN 'day' THEN 'YYYY-MM-DD' WHEN 'month' THEN 'YYYY-MM' ELSE '"total"' END)`;

/**
 * The columns a closing statement writes from the request's record (RequestRecord, as jsonb:
 * null leaves them null), so the record lands with the charge or release, in the same row.
 */
const recordColumns = (rec: string) =>
  `outcome = (${rec}->>'outcome')::"RequestOutcome", user_id = (${rec}->>'userId')::uuid, provider = ${rec}->>'provider',
      stream = (${rec}->>'stream')::boolean, request_id = ${rec}->>'requestId', error_message = ${rec}->>'errorMessage',
      duration_ms = (${rec}->>'durationMs')::int`;

/** What a key has spent in the current period (SQL over `table`'s api_keys columns); also read where a key's budget is carved out. */
export const spentNow = (table: string) => `CASE WHEN ${table}.budget_window = ${budgetWindow(table)} THEN ${table}.budget_spent ELSE 0 END`;

/**
 * Reserves calls in arrival order, each all-or-nothing: a call is accepted while the running
 * total of accepted calls fits what the namespace may spend (credits - reserved), read on the
 * namespace row this statement has locked. Returns the ids of the reservations it wrote, each
 * with what the namespace could spend before them (the batch's own amounts not yet taken off).
 *
 * $1 namespace id, $2 reservation ids, $3 amounts, $4 references, $5 the call each item belongs to,
 * $6 API key ids, $7 models, $8 endpoints (the usage facts known up front).
 */
export const RESERVE_SQL = `
  WITH req AS (
    SELECT r.id, r.amount, r.reference, r.call, r.api_key_id, r.model, r.endpoint
    FROM unnest($2::uuid[], $3::numeric[], $4::text[], $5::int[], $6::uuid[], $7::text[], $8::text[])
      AS r(id, amount, reference, call, api_key_id, model, endpoint)
  ), calls AS (
    SELECT call, sum(amount) AS amount FROM req GROUP BY call
  ), ns AS (
    SELECT id, credits - reserved AS available FROM namespaces WHERE id = $1::uuid FOR UPDATE
  ), accepted AS (
    SELECT c.call
    FROM (SELECT calls.*, sum(calls.amount) OVER (ORDER BY calls.call) AS running FROM calls) c, ns
    WHERE c.running <= ns.available
  ), acc AS (
    SELECT req.* FROM req JOIN accepted USING (call)
  ), upd AS (
    UPDATE namespaces n SET reserved = n.reserved + (SELECT sum(amount) FROM acc)
    WHERE n.id = $1::uuid AND EXISTS (SELECT 1 FROM acc)
    RETURNING n.id
  )
  INSERT INTO credit_reservations (id, namespace_id, amount, reference, status, api_key_id, model, endpoint)
  SELECT acc.id, upd.id, acc.amount, acc.reference, 'open', acc.api_key_id, acc.model, acc.endpoint FROM acc, upd
  RETURNING id::text AS id, (SELECT available FROM ns)::text AS available`;

/**
 * RESERVE_SQL for one call of one reservation, the common case whenever calls do not overlap:
 * the same rule (taken only if it fits what the namespace may spend, judged on its row under
 * the lock this UPDATE takes) and the same answer, without the batch's unnest, grouping and
 * window. Planned and run, it costs Postgres about half as much CPU per reserve-and-settle as
 * the batch statements given one call (0.36 against 0.60-0.82 ms on a 2-core machine).
 * credit-statements.spec.ts holds the two to the same outcomes.
 *
 * $1 namespace id, $2 amount, $3 reservation id, $4 reference, $5 API key id, $6 model, $7 endpoint.
 */
export const RESERVE_ONE_SQL = `
  WITH upd AS (
    UPDATE namespaces SET reserved = reserved + $2::numeric
    WHERE id = $1::uuid AND $2::numeric <= credits - reserved
    RETURNING id, credits - reserved + $2::numeric AS available
  )
  INSERT INTO credit_reservations (id, namespace_id, amount, reference, status, api_key_id, model, endpoint)
  SELECT $3::uuid, upd.id, $2::numeric, $4::text, 'open', $5::uuid, $6::text, $7::text FROM upd
  RETURNING id::text AS id, (SELECT available FROM upd)::text AS available`;

/**
 * One call of a key with a budget: its reservations are taken only if both the namespace's
 * credits and the key's budget (spent this period + held + this call <= max_spend) allow all of
 * them, judged on both rows under their locks, so concurrent calls can never overspend either.
 * Returns one row saying which allowed it (none: the key is gone), and the budget and the
 * namespace's spare credits as they stood before this call.
 *
 * $1 namespace id, $2 reservation ids, $3 amounts, $4 references, $5 API key id, $6 model, $7 endpoint.
 */
export const RESERVE_BUDGETED_SQL = `
  WITH req AS (
    SELECT r.id, r.amount, r.reference FROM unnest($2::uuid[], $3::numeric[], $4::text[]) AS r(id, amount, reference)
  ), total AS (
    SELECT sum(amount) AS amount FROM req
  ), ns AS (
    SELECT id, credits - reserved AS available FROM namespaces WHERE id = $1::uuid FOR UPDATE
  ), k AS (
    SELECT id, budget_max_spend AS max_spend, budget_reserved AS held, ${budgetWindow('api_keys')} AS period, ${spentNow('api_keys')} AS spent
    FROM api_keys WHERE id = $5::uuid FOR UPDATE
  ), verdict AS (
    SELECT total.amount <= ns.available AS credits_ok,
           k.max_spend IS NULL OR k.spent + k.held + total.amount <= k.max_spend AS budget_ok
    FROM total, ns, k
  ), kupd AS (
    UPDATE api_keys a SET budget_window = k.period, budget_spent = k.spent, budget_reserved = a.budget_reserved + (SELECT amount FROM total)
    FROM k, verdict WHERE a.id = k.id AND verdict.credits_ok AND verdict.budget_ok
    RETURNING a.id
  ), upd AS (
    UPDATE namespaces n SET reserved = n.reserved + (SELECT amount FROM total)
    FROM verdict WHERE n.id = $1::uuid AND verdict.credits_ok AND verdict.budget_ok
    RETURNING n.id
  ), ins AS (
    INSERT INTO credit_reservations (id, namespace_id, amount, reference, status, api_key_id, budget_hold, model, endpoint)
    SELECT req.id, upd.id, req.amount, req.reference, 'open', $5::uuid, true, $6, $7 FROM req, upd
    RETURNING id
  )
  SELECT verdict.credits_ok, verdict.budget_ok, k.spent::text AS spent, k.held::text AS held, k.max_spend::text AS max_spend,
         ns.available::text AS available, (SELECT count(*) FROM ins)::int AS inserted
  FROM verdict, k, ns`;

/**
 * The settle rule (docs/credits.md): a request is charged its actual cost. What the
 * reservation covers is always charged; a cost above it is charged as far as the namespace's
 * unreserved credits reach, in the order the settles were given, so a balance never goes
 * negative and never pays for more than was delivered. A negative cost charges nothing.
 *
 * A reservation held against a key's budget is never charged more than it reserved, so the
 * budget cannot be overspent by a request that cost more than its estimate.
 *
 * Only reservations still `open` are settled, under their row locks: a retried or concurrent
 * settle (or release) of the same reservation finds nothing to do, so nothing is charged twice.
 * The usage delivered (tokens, images, video seconds) is written on the reservation with its
 * charge, so usage reports and charges are one record. Returns one row per reservation it
 * settled, with what it charged.
 *
 * $1 reservation ids, $2 actual costs, $3 input tokens, $4 output tokens, $5 images, $6 video seconds
 * (same order), $7 the request records as one JSON array in that order (null where a settle has
 * none; recordsArrayJson): one jsonb parameter, where a jsonb[] made pg escape every record's
 * quotes into an array literal, a cost that grew with the record (an upstream's error text).
 */
export const SETTLE_SQL = `
  WITH req AS (
    SELECT r.id, r.actual, r.ord, r.input_tokens, r.output_tokens, r.images, r.video_seconds, $7::jsonb -> (r.ord::int - 1) AS rec
    FROM unnest($1::uuid[], $2::numeric[], $3::int[], $4::int[], $5::int[], $6::numeric[]) WITH ORDINALITY
      AS r(id, actual, input_tokens, output_tokens, images, video_seconds, ord)
  ), cur AS (
    SELECT c.id AS rid, c.namespace_id, c.amount, c.api_key_id, c.budget_hold, req.ord,
           req.input_tokens, req.output_tokens, req.images, req.video_seconds, req.rec,
           CASE WHEN c.budget_hold THEN LEAST(GREATEST(req.actual, 0), c.amount) ELSE GREATEST(req.actual, 0) END AS actual
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
    SELECT rid, namespace_id, amount, ord, api_key_id, budget_hold, input_tokens, output_tokens, images, video_seconds, rec,
           LEAST(actual, amount) + LEAST(excess_so_far, free) - LEAST(excess_so_far - excess, free) AS charge
    FROM beyond
  ), closed AS (
    UPDATE credit_reservations c SET status = 'settled', closed_at = now(),
      charged = priced.charge, input_tokens = COALESCE(priced.input_tokens, 0), output_tokens = COALESCE(priced.output_tokens, 0),
      images = COALESCE(priced.images, 0), video_seconds = COALESCE(priced.video_seconds, 0),
      ${recordColumns('priced.rec')}
    FROM priced WHERE c.id = priced.rid
    RETURNING c.id
  ), budgets AS (
    UPDATE api_keys a SET budget_spent = ${spentNow('a')} + t.charge, budget_window = ${budgetWindow('a')}, budget_reserved = a.budget_reserved - t.amount
    FROM (SELECT api_key_id, sum(amount) AS amount, sum(charge) AS charge FROM priced WHERE budget_hold GROUP BY api_key_id) t
    WHERE a.id = t.api_key_id
    RETURNING a.id
  ), upd AS (
    UPDATE namespaces n SET reserved = n.reserved - t.amount, credits = n.credits - t.charge
    FROM (SELECT namespace_id, sum(amount) AS amount, sum(charge) AS charge FROM priced GROUP BY namespace_id) t
    WHERE n.id = t.namespace_id
    RETURNING n.id, n.credits
  )
  INSERT INTO credit_ledger (id, namespace_id, kind, amount, balance_after, reservation_id)
  SELECT atelier_uuid_v7(), w.namespace_id, 'charge'::"LedgerKind", -w.charge, upd.credits + (w.total - w.running), w.rid
  FROM (
    SELECT rid, namespace_id, charge,
           sum(charge) OVER (PARTITION BY namespace_id ORDER BY ord) AS running,
           sum(charge) OVER (PARTITION BY namespace_id) AS total
    FROM priced
  ) w JOIN upd ON upd.id = w.namespace_id
  RETURNING reservation_id::text AS id, (-amount)::text AS charged`;


/**
 * SETTLE_SQL for one reservation (see RESERVE_ONE_SQL for why): the same rule, locks in the
 * same order (the reservation row, then the namespace row, then the key row) and the same
 * answer. With one settle there is no earlier excess in the batch to share the free credits
 * with, so the charge is the part the reservation covers plus as much of the excess as the
 * namespace's unreserved credits reach.
 *
 * $1 reservation id, $2 actual cost, $3 input tokens, $4 output tokens, $5 images, $6 video seconds,
 * $7 the request's record (jsonb, or null).
 */
export const SETTLE_ONE_SQL = `
  WITH cur AS (
    SELECT c.id, c.namespace_id, c.amount, c.api_key_id, c.budget_hold,
           CASE WHEN c.budget_hold THEN LEAST(GREATEST($2::numeric, 0), c.amount) ELSE GREATEST($2::numeric, 0) END AS actual
    FROM credit_reservations c
    WHERE c.id = $1::uuid AND c.status = 'open'
    FOR UPDATE
  ), ns AS (
    SELECT n.id, GREATEST(n.credits - n.reserved, 0) AS free
    FROM namespaces n WHERE n.id = (SELECT namespace_id FROM cur)
    FOR UPDATE
  ), priced AS (
    SELECT cur.id, cur.namespace_id, cur.amount, cur.api_key_id, cur.budget_hold,
           LEAST(cur.actual, cur.amount) + LEAST(GREATEST(cur.actual - cur.amount, 0), ns.free) AS charge
    FROM cur JOIN ns ON ns.id = cur.namespace_id
  ), closed AS (
    UPDATE credit_reservations c SET status = 'settled', closed_at = now(), charged = priced.charge,
      input_tokens = COALESCE($3::int, 0), output_tokens = COALESCE($4::int, 0),
      images = COALESCE($5::int, 0), video_seconds = COALESCE($6::numeric, 0),
      ${recordColumns('$7::jsonb')}
    FROM priced WHERE c.id = priced.id
    RETURNING c.id
  ), budgets AS (
    UPDATE api_keys a SET budget_spent = ${spentNow('a')} + priced.charge, budget_window = ${budgetWindow('a')}, budget_reserved = a.budget_reserved - priced.amount
    FROM priced WHERE priced.budget_hold AND a.id = priced.api_key_id
    RETURNING a.id
  ), upd AS (
    UPDATE namespaces n SET reserved = n.reserved - priced.amount, credits = n.credits - priced.charge
    FROM priced WHERE n.id = priced.namespace_id
    RETURNING n.id, n.credits
  )
  INSERT INTO credit_ledger (id, namespace_id, kind, amount, balance_after, reservation_id)
  SELECT atelier_uuid_v7(), priced.namespace_id, 'charge'::"LedgerKind", -priced.charge, upd.credits, priced.id
  FROM priced JOIN upd ON upd.id = priced.namespace_id
  RETURNING reservation_id::text AS id, (-amount)::text AS charged`;

/**
 * Gives a reservation's credits back (failure, cancel, a stale sweep): only if still `open`, so
 * it is idempotent; its budget hold, if any, is given back in the same statement.
 *
 * $1 reservation id, $2 the request's record (jsonb, or null: a stale sweep knows none).
 */
export const RELEASE_SQL = `
  WITH cur AS (
    SELECT id, namespace_id, amount, api_key_id, budget_hold FROM credit_reservations
    WHERE id = $1::uuid AND status = 'open'
    FOR UPDATE
  ), closed AS (
    UPDATE credit_reservations c SET status = 'released', closed_at = now(), charged = 0,
      ${recordColumns('$2::jsonb')}
    FROM cur WHERE c.id = cur.id
    RETURNING c.id
  ), budgets AS (
    UPDATE api_keys a SET budget_reserved = a.budget_reserved - cur.amount
    FROM cur, closed WHERE a.id = cur.api_key_id AND cur.budget_hold
    RETURNING a.id
  )
  UPDATE namespaces n SET reserved = n.reserved - cur.amount
  FROM cur, closed WHERE n.id = cur.namespace_id
  RETURNING n.id::text AS id`;
