import { randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import { createPgPool } from '@atelier/db';
import { createTestEnvironment, type TestEnvironment } from '@atelier/testing';
import { LEDGER_SESSION_SETTINGS } from './batched-credit-ledger.service';
import { RELEASE_SQL, SETTLE_ONE_SQL, SETTLE_SQL } from './credit-statements';

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  Plans?: PlanNode[];
}

/** How each plan node reads credit_reservations: "pkey probe", or what it does instead. */
function reservationReads(node: PlanNode): string[] {
  const own =
    node['Relation Name'] === 'credit_reservations' && node['Node Type'] !== 'ModifyTable'
      ? [node['Node Type'] === 'Index Scan' && node['Index Name'] === 'credit_reservations_pkey' && node['Index Cond'] ? 'pkey probe' : `${node['Node Type']} ${node['Index Name'] ?? ''} ${node['Index Cond'] ?? '(no condition)'}`.trim()]
      : [];
  return [...own, ...(node.Plans ?? []).flatMap(reservationReads)];
}

const ids = (n: number) => `'{${Array.from({ length: n }, () => randomUUID()).join(',')}}'`;
const list = (n: number, value: string | number) => `'{${Array.from({ length: n }, () => value).join(',')}}'`;

/** Each statement the settles and releases run, with arguments to explain it with (no rows match them). */
const STATEMENTS = {
  'batch settle': { text: SETTLE_SQL, args: () => [ids(16), list(16, '0.5'), list(16, 10), list(16, 5), list(16, 0), list(16, 0), `'[${Array.from({ length: 16 }, () => 'null').join(',')}]'`] },
  'one settle': { text: SETTLE_ONE_SQL, args: () => [`'${randomUUID()}'`, `'0.5'`, '10', '5', '0', '0', 'NULL'] },
  release: { text: RELEASE_SQL, args: () => [`'${randomUUID()}'`, 'NULL'] },
};

/**
 * A connection keeps the plan it made for a named statement until the tables are analyzed
 * again, which a server without autovacuum never does: the plan made on a new, empty table is
 * the one every later settle runs, and if it reads the whole table, each settle costs more as the
 * reservations pile up. Forcing the generic plan here shows the plan such a connection caches.
 *
 * Not covered, and not guaranteed: a plan made right after a table was analyzed while it held
 * only a few dozen rows. The batch settle's update may then read the whole (then tiny) table;
 * with autovacuum, the next analyze (after 10 % more rows) replaces that plan.
 */
describe('the plans a ledger connection caches for settle and release find reservations by primary key (real Postgres)', () => {
  let env: TestEnvironment;
  let pool: Pool;

  beforeAll(async () => {
    env = await createTestEnvironment();
    pool = createPgPool(env.databaseUrl, 1, 'credit-statement-plans-spec', LEDGER_SESSION_SETTINGS);
  });
  afterAll(async () => {
    await pool?.end();
    await env?.cleanup();
  });

  async function cachedPlans(): Promise<Record<string, string[]>> {
    const client: PoolClient = await pool.connect();
    try {
      await client.query('SET plan_cache_mode = force_generic_plan');
      const out: Record<string, string[]> = {};
      for (const [name, statement] of Object.entries(STATEMENTS)) {
        const prepared = `plan_${randomUUID().replace(/-/g, '')}`;
        await client.query(`PREPARE ${prepared} AS ${statement.text}`);
        const { rows } = await client.query<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(`EXPLAIN (FORMAT JSON) EXECUTE ${prepared}(${statement.args().join(', ')})`);
        out[name] = reservationReads(rows[0]['QUERY PLAN'][0].Plan);
        await client.query(`DEALLOCATE ${prepared}`);
      }
      return out;
    } finally {
      client.release();
    }
  }

  const onlyProbes = (plans: Record<string, string[]>) =>
    Object.fromEntries(Object.entries(plans).map(([name, reads]) => [name, reads.length > 0 && reads.every((r) => r === 'pkey probe') ? 'pkey probes only' : reads]));

  it('planned on the empty, never analyzed table of a new install', async () => {
    expect(onlyProbes(await cachedPlans())).toEqual({ 'batch settle': 'pkey probes only', 'one settle': 'pkey probes only', release: 'pkey probes only' });
  });

  it('planned on an analyzed table of 3,000 reservations, whose statistics say few of them are open', async () => {
    const namespaceId = randomUUID();
    await pool.query(`INSERT INTO namespaces (id, name, type, credits) VALUES ($1, $2, 'org', 1000)`, [namespaceId, `plans-${namespaceId}`]);
    await pool.query(
      `INSERT INTO credit_reservations (id, namespace_id, amount, reference, status, closed_at, charged)
       SELECT gen_random_uuid(), $1, 0.01, 'chat:' || i, CASE WHEN i % 500 = 0 THEN 'open' ELSE 'settled' END::"ReservationStatus",
              CASE WHEN i % 500 = 0 THEN NULL ELSE now() END, 0.01
       FROM generate_series(1, 3000) i`,
      [namespaceId],
    );
    await pool.query('ANALYZE credit_reservations');
    expect(onlyProbes(await cachedPlans())).toEqual({ 'batch settle': 'pkey probes only', 'one settle': 'pkey probes only', release: 'pkey probes only' });
  });
});
