#!/usr/bin/env node
// npm run bench:usage — GET /api/usage over a month of a busy namespace: 1,000,000 settled
// requests (5 keys, 3 models, 3 endpoints, spread over 30 days) beside 500,000 of another
// namespace, through the compiled gateway. Reports each group_by's answer time (p50 and max of
// BENCH_USAGE_RUNS, after warm-up) beside the bare authenticated GET of the same run, and the
// very first report, which sums the month's whole days into usage_daily (once per day ever).
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { benchConfig, benchDatabase, buildAll, machine, percentile, startBenchGateway } from './bench-env.mjs';

const ROWS = Number(process.env.BENCH_USAGE_ROWS ?? 1_000_000);
const RUNS = Number(process.env.BENCH_USAGE_RUNS ?? 15);

buildAll();
const db = await benchDatabase();
const config = benchConfig(db);
const { app, base, user } = await startBenchGateway(config, 1000);
const admin = { authorization: `Bearer ${config.ADMIN_TOKEN}`, 'content-type': 'application/json' };
const auth = { authorization: `Bearer ${user.api_key}` };
console.log(`atelier usage benchmark — ${machine()}, ${ROWS.toLocaleString('en')} usage rows in one namespace`);

try {
  const keys = [];
  for (let i = 0; i < 5; i++) {
    const res = await fetch(`${base}/api/admin/users/bench/api_keys`, { method: 'POST', headers: admin, body: JSON.stringify({ name: `app ${i}` }) });
    keys.push((await res.json()).prefix);
  }
  await fetch(`${base}/api/admin/users`, { method: 'POST', headers: admin, body: JSON.stringify({ username: 'neighbour', credits: '1' }) });

  const client = new pg.Client({ connectionString: db.databaseUrl });
  await client.connect();
  const seed = async (namespace, rows) => {
    const started = performance.now();
    // Settled reservations as SETTLE_SQL leaves them: charged, with usage and the UTC day.
    await client.query(
      `INSERT INTO credit_reservations (id, namespace_id, amount, charged, status, reference, created_at, closed_at,
                                        api_key_id, model, endpoint, input_tokens, output_tokens, images, video_seconds)
       SELECT gen_random_uuid(), n.id, 0.002, 0.0015, 'settled', 'chat:bench-' || g, t, t,
              k.ids[1 + g % 5], (ARRAY['remote-echo', 'local-chat', 'local-image'])[1 + g % 3],
              (ARRAY['/api/ai/chat/completions', '/api/ai/chat/completions', '/api/ai/images/generate'])[1 + g % 3],
              CASE WHEN g % 3 = 2 THEN 0 ELSE 100 + g % 50 END, CASE WHEN g % 3 = 2 THEN 0 ELSE 40 + g % 20 END,
              CASE WHEN g % 3 = 2 THEN 1 ELSE 0 END, 0
       FROM generate_series(1, $2::int) g
       CROSS JOIN LATERAL (SELECT now() - (g::float8 / $2::int) * interval '30 days' AS t) w
       CROSS JOIN (SELECT id FROM namespaces WHERE name = $1) n
       CROSS JOIN (SELECT array_agg(id) AS ids FROM api_keys) k`,
      [namespace, rows],
    );
    return ((performance.now() - started) / 1000).toFixed(1);
  };
  console.log(`seeded ${ROWS.toLocaleString('en')} rows in ${await seed('bench', ROWS)} s, ${(ROWS / 2).toLocaleString('en')} for a neighbour in ${await seed('neighbour', ROWS / 2)} s`);
  await client.query('VACUUM ANALYZE credit_reservations');
  await client.end();

  const from = new Date(Date.now() - 30 * 86_400_000 - 60_000).toISOString();
  const time = async (url, check) => {
    const samples = [];
    let first;
    for (let i = 0; i < RUNS + 3; i++) {
      const started = performance.now();
      const res = await fetch(`${base}${url}`, { headers: auth });
      const body = await res.text();
      const ms = performance.now() - started;
      if (res.status !== 200) throw new Error(`${url}: ${res.status} ${body}`);
      if (i === 0) {
        check?.(body);
        first = ms;
      }
      if (i >= 3) samples.push(ms);
    }
    return { first, p50: percentile(samples, 0.5), max: Math.max(...samples) };
  };
  const floor = await time('/api/credits');
  console.log(`\nauthenticated GET /api/credits (the HTTP floor): p50 ${floor.p50.toFixed(2)} ms`);
  console.log('GET /api/usage, a month of the busy namespace (target < 200 ms):');
  const results = {};
  for (const group of ['model', 'api_key', 'day', 'endpoint']) {
    const r = await time(`/api/usage?from=${encodeURIComponent(from)}&group_by=${group}`, (body) => {
      const total = JSON.parse(body).total.requests;
      if (total !== ROWS) throw new Error(`group_by=${group} counted ${total} requests, not ${ROWS}`);
    });
    results[group] = r;
    if (group === 'model') console.log(`  first report (sums 30 whole days into the daily roll-up, once): ${r.first.toFixed(0)} ms`);
    console.log(`  group_by=${group.padEnd(8)} p50 ${r.p50.toFixed(1).padStart(6)} ms   max ${r.max.toFixed(1).padStart(6)} ms   ${r.p50 < 200 ? 'ok' : 'OVER'}`);
  }
  const csv = await time(`/api/usage?from=${encodeURIComponent(from)}&group_by=day&format=csv`);
  console.log(`  group_by=day as CSV p50 ${csv.p50.toFixed(1).padStart(6)} ms`);
  if (process.env.BENCH_JSON) {
    const { writeFileSync } = await import('node:fs');
    writeFileSync(process.env.BENCH_JSON, JSON.stringify({ rows: ROWS, floorMs: floor.p50, groups: results, csvMs: csv.p50 }));
  }
} finally {
  await app.close();
  await db.drop();
}
