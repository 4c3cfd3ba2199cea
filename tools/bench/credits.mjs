#!/usr/bin/env node
// npm run bench:credits — reserve+settle cycles of the credit ledger against real Postgres,
// all on ONE namespace (the contended case: every cycle locks the same row).
import { benchDatabase, buildAll, dist, machine, percentile } from './bench-env.mjs';

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
await prisma.$disconnect();
await db.drop();
