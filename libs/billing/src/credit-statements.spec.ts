import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { createPgPool } from '@atelier/db';
import { createTestEnvironment, fc, uniqueName, type TestEnvironment } from '@atelier/testing';
import { recordsArrayJson, requestRecordJson } from './credit-ledger.service';
import { RESERVE_ONE_SQL, RESERVE_SQL, SETTLE_ONE_SQL, SETTLE_SQL } from './credit-statements';

/**
 * The one-call statements are the batch statements' rule written for one call. Each case is set
 * up twice, in two namespaces alike in everything; one runs the batch statement with a single
 * call, the other the one-call statement, and both must answer the same and leave the same rows.
 */
describe('the one-call credit statements (real Postgres)', () => {
  let env: TestEnvironment;
  let pool: Pool;
  let userId: string;

  beforeAll(async () => {
    env = await createTestEnvironment();
    pool = createPgPool(env.databaseUrl, 4, 'credit-statements-spec');
    userId = randomUUID();
    await pool.query(`INSERT INTO users (id, username) VALUES ($1, $2)`, [userId, uniqueName('statements')]);
  });
  afterAll(async () => {
    await pool?.end();
    await env?.cleanup();
  });

  /** Micro-credits as the exact decimal string the ledger passes (numeric(20, 6)). */
  const credits = (min: number, max: number) => fc.integer({ min, max }).map((micro) => (micro / 1e6).toFixed(6));

  async function namespace(balance: string, reserved: string): Promise<string> {
    const id = randomUUID();
    await pool.query(`INSERT INTO namespaces (id, name, type, credits, reserved) VALUES ($1, $2, 'org', $3, $4)`, [id, uniqueName('ns'), balance, reserved]);
    return id;
  }

  async function apiKey(budget: { maxSpend: string; spent: string; held: string; currentWindow: boolean }): Promise<string> {
    const id = randomUUID();
    await pool.query(
      `INSERT INTO api_keys (id, user_id, prefix, hash, budget_max_spend, budget_period, budget_window, budget_spent, budget_reserved)
       VALUES ($1, $2, $3, $4, $5, 'month', CASE WHEN $6 THEN to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM') ELSE '2001-01' END, $7, $8)`,
      [id, userId, uniqueName('key'), randomUUID(), budget.maxSpend, budget.currentWindow, budget.spent, budget.held],
    );
    return id;
  }

  /** Everything a statement may have changed, without the ids that differ between the twins. */
  async function state(namespaceId: string, keyId: string | null) {
    const [ns, reservations, ledger, key] = await Promise.all([
      pool.query(`SELECT credits::text, reserved::text FROM namespaces WHERE id = $1`, [namespaceId]),
      pool.query(
        `SELECT amount::text, charged::text, status, reference, budget_hold, model, endpoint, input_tokens, output_tokens, images, video_seconds::text,
                api_key_id IS NOT NULL AS has_key, closed_at IS NOT NULL AS closed,
                outcome, user_id, provider, stream, request_id, error_message, duration_ms
         FROM credit_reservations WHERE namespace_id = $1 ORDER BY reference`,
        [namespaceId],
      ),
      pool.query(`SELECT kind, amount::text, balance_after::text FROM credit_ledger WHERE namespace_id = $1 ORDER BY created_at, amount`, [namespaceId]),
      keyId ? pool.query(`SELECT budget_spent::text, budget_reserved::text, budget_window FROM api_keys WHERE id = $1`, [keyId]) : { rows: [] },
    ]);
    return { namespace: ns.rows[0], reservations: reservations.rows, ledger: ledger.rows, key: key.rows[0] };
  }

  it('RESERVE_ONE_SQL takes a reservation exactly when RESERVE_SQL with one call does, with the same answer and rows', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          balance: credits(0, 5_000_000),
          // Above the balance too: an operator may have lowered credits below what is held.
          reserved: credits(0, 6_000_000),
          // 'all': exactly what the namespace may still spend, the boundary that must be taken.
          amount: fc.oneof(credits(0, 6_000_000), fc.constant('0'), fc.constant('all')),
          tagged: fc.boolean(),
          missingNamespace: fc.integer({ min: 0, max: 4 }).map((n) => n === 0),
        }),
        async (drawn) => {
          const all = Math.max(Number(drawn.balance) - Number(drawn.reserved), 0).toFixed(6);
          const c = { ...drawn, amount: drawn.amount === 'all' ? all : drawn.amount };
          const tags = c.tagged ? [await apiKey({ maxSpend: '100', spent: '0', held: '0', currentWindow: true }), 'model-a', '/api/ai/chat/completions'] : [null, null, null];
          const run = async (one: boolean) => {
            const ns = await namespace(c.balance, c.reserved);
            const target = c.missingNamespace ? randomUUID() : ns;
            const id = randomUUID();
            const { rows } = one
              ? await pool.query(RESERVE_ONE_SQL, [target, c.amount, id, 'chat:case', ...tags])
              : await pool.query(RESERVE_SQL, [target, [id], [c.amount], ['chat:case'], [0], ...tags.map((t) => [t])]);
            return { answer: rows.map((r: { id: string; available: string }) => ({ mine: r.id === id, available: r.available })), after: await state(ns, null) };
          };
          const [batch, one] = [await run(false), await run(true)];
          expect(one).toEqual(batch);
          // The rule itself, so the two cannot agree on something wrong.
          const fits = !c.missingNamespace && Number(c.amount) <= Number(c.balance) - Number(c.reserved) + 1e-9;
          expect(one.answer).toHaveLength(fits ? 1 : 0);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('SETTLE_ONE_SQL charges and records exactly what SETTLE_SQL with one settle does, budget holds and retried settles included', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          balance: credits(0, 10_000_000),
          amount: credits(0, 3_000_000),
          /** Held by other requests: what a cost above the reservation cannot take. */
          othersHold: credits(0, 4_000_000),
          actual: credits(-1_000_000, 20_000_000),
          budget: fc.option(fc.record({ maxSpend: credits(0, 50_000_000), spent: credits(0, 5_000_000), currentWindow: fc.boolean() }), { nil: undefined }),
          usage: fc.tuple(fc.nat(100_000), fc.nat(100_000), fc.nat(10), fc.integer({ min: 0, max: 600_000 }).map((ms) => ms / 1000)),
          settledBefore: fc.integer({ min: 0, max: 3 }).map((n) => n === 0),
          // How the request ended (any text an upstream may send, NULs included), or none (a media settle).
          record: fc.option(
            fc.record({
              outcome: fc.constantFrom('succeeded' as const, 'failed' as const, 'cancelled' as const),
              userId: fc.oneof(fc.constant(userId), fc.string()),
              provider: fc.option(fc.string(), { nil: null }),
              stream: fc.boolean(),
              requestId: fc.option(fc.string(), { nil: null }),
              errorMessage: fc.option(fc.string(), { nil: null }),
              durationMs: fc.double({ min: -1, max: 1e10, noNaN: true }),
            }),
            { nil: undefined },
          ),
        }),
        async (c) => {
          const record = requestRecordJson(c.record);
          // The reservation must be one the balance could have taken: it and the others' holds fit.
          const balance = Math.max(Number(c.balance), Number(c.amount) + Number(c.othersHold)).toFixed(6);
          const reserved = (Number(c.amount) + Number(c.othersHold)).toFixed(6);
          const run = async (one: boolean) => {
            const ns = await namespace(balance, reserved);
            const keyId = c.budget ? await apiKey({ ...c.budget, held: c.amount }) : null;
            const id = randomUUID();
            await pool.query(
              `INSERT INTO credit_reservations (id, namespace_id, amount, reference, status, api_key_id, budget_hold, model, endpoint)
               VALUES ($1, $2, $3, 'chat:case', 'open', $4, $5, 'model-a', '/api/ai/chat/completions')`,
              [id, ns, c.amount, keyId, keyId !== null],
            );
            const settle = () =>
              one
                ? pool.query(SETTLE_ONE_SQL, [id, c.actual, ...c.usage, record])
                : pool.query(SETTLE_SQL, [[id], [c.actual], ...c.usage.map((u) => [u]), recordsArrayJson([record])]);
            if (c.settledBefore) await settle();
            const { rows } = await settle();
            return { answer: rows.map((r: { id: string; charged: string }) => ({ mine: r.id === id, charged: r.charged })), after: await state(ns, keyId) };
          };
          const [batch, one] = [await run(false), await run(true)];
          expect(one).toEqual(batch);
          if (c.settledBefore) {
            expect(one.answer).toEqual([]);
          } else {
            // The rule itself: what the reservation covers, plus what free credits reach beyond it.
            const actual = Math.max(Number(c.actual), 0);
            const free = Number(balance) - Number(reserved);
            const expected = c.budget ? Math.min(actual, Number(c.amount)) : Math.min(actual, Number(c.amount)) + Math.min(Math.max(actual - Number(c.amount), 0), free);
            expect(one.answer).toHaveLength(1);
            expect(Number(one.answer[0].charged)).toBeCloseTo(expected, 6);
            expect(one.after.namespace).toEqual({ credits: (Number(balance) - expected).toFixed(6), reserved: Number(c.othersHold).toFixed(6) });
            // The record lands with the charge, whatever text it carries.
            expect(one.after.reservations[0]).toMatchObject(
              c.record
                ? { outcome: c.record.outcome, provider: c.record.provider?.replace(/\0/g, '\uFFFD') ?? null, stream: c.record.stream, user_id: c.record.userId === userId ? userId : null }
                : { outcome: null, provider: null, stream: null, user_id: null },
            );
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
