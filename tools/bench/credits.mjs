#!/usr/bin/env node
// npm run bench:credits — reserve+settle cycles of the credit ledger against real Postgres,
// all on ONE namespace (the contended case: every cycle locks the same row).
//
// BENCH_TABLE_ROWS=<n> (e.g. 3000000) adds a run on tables that already hold n settled requests
// (a reservation and its ledger charge each, seeded with random keys): 64 concurrent loops through
// BatchedCreditLedger for BENCH_SECONDS (default 10), three rounds, with Postgres's CPU per cycle
// (every `postgres` process on this machine, from /proc) and the table and index blocks it read
// from outside shared_buffers per cycle (pg_statio). Once a table's indexes outgrow shared_buffers,
// where each new key lands decides that cost. BENCH_CREDITS_ROOT=<another checkout> (built: see
// bench:gateway) alternates that checkout's ledger with this one's on the same tables.
import path from 'node:path';
import { benchDatabase, buildAll, closedLoop, cpuSeconds, dist, machine, percentile, require } from './bench-env.mjs';
import { root as thisRoot } from '../bootstrap.mjs';

buildAll();
const db = await benchDatabase();
const { createPrismaClient } = dist('libs/db/src/index.js');
const { CreditLedger } = dist('libs/billing/src/index.js');
const prisma = createPrismaClient(db.databaseUrl, 20);
const ledger = new CreditLedger(prisma);
const ns = await prisma.namespace.create({ data: { name: 'bench', type: 'org', credits: '1000000' } });

const total = Number(process.env.BENCH_OPS ?? 4000);
const concurrency = 20;
let next = 0;
const latencies = [];
const started = performance.now();
await Promise.all(
  Array.from({ length: concurrency }, async () => {
    while (next < total) {
      next += 1;
      const t = performance.now();
      const r = await ledger.reserve(ns.id, '0.02', 'bench');
      await ledger.settle(r.id, '0.015');
      latencies.push(performance.now() - t);
    }
  }),
);
const seconds = (performance.now() - started) / 1000;
latencies.sort((a, b) => a - b);
const pct = (p) => percentile(latencies, p).toFixed(2);
const balance = await ledger.balance(ns.id);
console.log(`atelier credit ledger benchmark — ${machine()}, ${concurrency} concurrent clients, one namespace`);
console.log(`${total} reserve+settle cycles in ${seconds.toFixed(2)} s = ${Math.round(total / seconds)} cycles/s; p50 ${pct(0.5)} ms, p99 ${pct(0.99)} ms`);
const expected = (1000000 - total * 0.015).toFixed(3);
console.log(`balance ${balance.credits} (expected ${expected}), reserved ${balance.reserved}`);
if (Number(balance.credits).toFixed(3) !== expected || balance.reserved !== '0') {
  console.error('ledger mismatch!');
  process.exitCode = 1;
}

// The same cycles through BatchedCreditLedger (the chat gateway's path): calls of one namespace
// that arrive while its previous transaction is in flight share the next one (group commit).
const { BatchedCreditLedger } = dist('libs/billing/src/index.js');
const batched = new BatchedCreditLedger(ledger, { DATABASE_URL: db.databaseUrl });
const ns2 = await prisma.namespace.create({ data: { name: 'bench-batched', type: 'org', credits: '1000000' } });
const batchedConcurrency = Number(process.env.BENCH_BATCHED_CONCURRENCY ?? 200);
let nextBatched = 0;
const batchedLatencies = [];
const startedBatched = performance.now();
await Promise.all(
  Array.from({ length: batchedConcurrency }, async () => {
    while (nextBatched < total) {
      nextBatched += 1;
      const t = performance.now();
      const r = await batched.reserve(ns2.id, '0.02', 'bench');
      await batched.settle(r, '0.015');
      batchedLatencies.push(performance.now() - t);
    }
  }),
);
const batchedSeconds = (performance.now() - startedBatched) / 1000;
batchedLatencies.sort((a, b) => a - b);
const bpct = (p) => batchedLatencies[Math.floor((batchedLatencies.length - 1) * p)].toFixed(2);
const batchedBalance = await ledger.balance(ns2.id);
console.log(
  `batched (BatchedCreditLedger, ${batchedConcurrency} concurrent clients): ${total} cycles in ${batchedSeconds.toFixed(2)} s = ` +
    `${Math.round(total / batchedSeconds)} cycles/s; p50 ${bpct(0.5)} ms, p99 ${bpct(0.99)} ms; ` +
    `${(batched.stats.calls / batched.stats.transactions).toFixed(1)} calls per transaction`,
);
console.log(`balance ${batchedBalance.credits} (expected ${expected}), reserved ${batchedBalance.reserved}`);
if (Number(batchedBalance.credits).toFixed(3) !== expected || batchedBalance.reserved !== '0') {
  console.error('batched ledger mismatch!');
  process.exitCode = 1;
}
await batched.onModuleDestroy();
const tableRows = Number(process.env.BENCH_TABLE_ROWS ?? 0);
if (tableRows > 0) await onLargeTables(tableRows);
await prisma.$disconnect();
await db.drop();

async function onLargeTables(rows) {
  const ledgerOf = (root) => {
    const from = (p) => require(path.join(root, 'dist/local', p));
    const client = from('libs/db/src/index.js').createPrismaClient(db.databaseUrl, 4);
    const { CreditLedger: Plain, BatchedCreditLedger: Batched } = from('libs/billing/src/index.js');
    return { client, ledger: new Batched(new Plain(client), { DATABASE_URL: db.databaseUrl }) };
  };
  const ns3 = await prisma.namespace.create({ data: { name: 'bench-large', type: 'org', credits: '100000000' } });
  const seeding = performance.now();
  await prisma.$executeRawUnsafe(
    `INSERT INTO credit_reservations (id, namespace_id, amount, charged, reference, status, created_at, closed_at, model, endpoint)
     SELECT gen_random_uuid(), $1::uuid, 0.02, 0.015, 'seed', 'settled', now() - interval '1 day', now() - interval '1 day', 'bench', '/api/ai/chat/completions'
     FROM generate_series(1, ${Math.floor(rows)})`,
    ns3.id,
  );
  await prisma.$executeRawUnsafe(
    `INSERT INTO credit_ledger (id, namespace_id, kind, amount, balance_after, reservation_id, created_at)
     SELECT gen_random_uuid(), namespace_id, 'charge', -charged, 0, id, created_at FROM credit_reservations WHERE reference = 'seed'`,
  );
  await prisma.$executeRawUnsafe('VACUUM ANALYZE credit_reservations');
  await prisma.$executeRawUnsafe('VACUUM ANALYZE credit_ledger');
  await prisma.$executeRawUnsafe('CHECKPOINT');
  const sizes = await prisma.$queryRawUnsafe(
    `SELECT relname AS name, pg_size_pretty(pg_relation_size(oid)) AS size FROM pg_class WHERE relname ~ '^credit_(reservations|ledger)' AND relkind IN ('r', 'i') ORDER BY 1`,
  );
  const [{ buffers }] = await prisma.$queryRawUnsafe(`SELECT current_setting('shared_buffers') AS buffers`);
  console.log(`\non tables holding ${rows} settled requests (seeded in ${((performance.now() - seeding) / 1000).toFixed(0)} s; shared_buffers ${buffers}):`);
  console.log(`   ${sizes.map((r) => `${r.name} ${r.size}`).join(', ')}`);
  const blocksRead = async () =>
    Number(
      (await prisma.$queryRawUnsafe(`SELECT sum(heap_blks_read + idx_blks_read)::bigint AS n FROM pg_statio_user_tables WHERE relname IN ('credit_reservations', 'credit_ledger')`))[0].n,
    );
  const loopSeconds = Number(process.env.BENCH_SECONDS ?? 10);
  const other = process.env.BENCH_CREDITS_ROOT ? path.resolve(process.env.BENCH_CREDITS_ROOT) : undefined;
  const sides = [['this checkout', thisRoot], ...(other ? [[other, other]] : [])];
  let cycles = 0;
  for (let round = 1; round <= 3; round++) {
    for (const [label, root] of round % 2 === 1 ? sides : [...sides].reverse()) {
      const { client, ledger: lanes } = ledgerOf(root);
      const cycle = async () => {
        const r = await lanes.reserve(ns3.id, '0.02', `large:${cycles++}`, { model: 'bench', endpoint: '/api/ai/chat/completions' });
        await lanes.settle(r, '0.015', { inputTokens: 10, outputTokens: 5 });
      };
      await closedLoop(cycle, 64, 1);
      const cpu0 = cpuSeconds({ postgres: 'postgres' });
      const read0 = await blocksRead();
      const run = await closedLoop(cycle, 64, loopSeconds);
      const cpu = ((cpuSeconds({ postgres: 'postgres' }).postgres.all - cpu0.postgres.all) * 1000) / run.ok;
      const reads = ((await blocksRead()) - read0) / run.ok;
      console.log(
        `   round ${round}, ${label}: ${Math.round(run.rps)} cycles/s, Postgres CPU ${cpu.toFixed(4)} ms per cycle, ` +
          `${reads.toFixed(2)} blocks read from outside shared_buffers per cycle${run.errors ? `; ${run.errors} errors (${run.lastError})` : ''}`,
      );
      await lanes.onModuleDestroy();
      await client.$disconnect();
    }
  }
}

