#!/usr/bin/env node
// npm run bench:queue — the async generation queue with Postgres and Redis on this machine:
// enqueue -> processing latency with idle workers, terminal -> event delivery latency,
// sustained enqueue throughput through the gateway, and memory per idle SSE connection.
import { fork } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { benchConfig, benchDatabase, benchTempDir, buildAll, dieWithBench, dist, histogramTotals, machine, percentile, stageLine, startBenchGateway } from './bench-env.mjs';

if (process.argv[2] === 'sse-client') {
  // Child process: opens N idle event streams so the server's memory is measured alone.
  const [url, key, n] = [process.argv[3], process.argv[4], Number(process.argv[5])];
  const http = await import('node:http');
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  let open = 0;
  let reopened = 0;
  await new Promise((resolve) => {
    // A connection reset while 10,000 open at once (about one run in ten) is opened again, as
    // EventSource would, so the run goes on instead of waiting for it forever.
    const openOne = () =>
      http
        .get(url, { agent, headers: { authorization: `Bearer ${key}` } }, (res) => {
          res.on('data', () => {});
          if (++open === n) resolve();
        })
        .on('error', (e) => {
          if (++reopened === 1) console.error(`an event stream failed while opening (${e.message}); opening it again`);
          setTimeout(openOne, 100);
        });
    for (let i = 0; i < n; i++) openOne();
  });
  if (reopened > 0) console.error(`${reopened} event stream(s) opened again`);
  process.send('open');
  await new Promise(() => {});
}


buildAll();
const db = await benchDatabase();
const { createService, BroadcastBus } = dist('libs/runtime/src/index.js');
const { GENERATION_COMPLETED_CHANNEL } = dist('libs/contracts/src/index.js');
const { PrismaService } = dist('libs/db/src/index.js');
const { QueueWorkerModule } = dist('apps/queue-worker/src/queue-worker.module.js');
const config = benchConfig(db, { STORAGE_DIR: benchTempDir('queue') });
const { app: gateway, base, user } = await startBenchGateway(config, 10000000);
const auth = { authorization: `Bearer ${user.api_key}`, 'content-type': 'application/json' };
const prisma = gateway.get(PrismaService);
console.log(`atelier queue benchmark — ${machine()}`);

// 1. Latencies with an idle worker: one generation at a time.
const worker = await createService(QueueWorkerModule.forRoot(config), config, { service: 'queue-worker' });
const received = new Map();
await gateway.get(BroadcastBus).subscribe(GENERATION_COMPLETED_CHANNEL, (e) => received.set(e.generation_id, Date.now()));
const pickup = [];
const delivery = [];
for (let i = 0; i < 150; i++) {
  const res = await (await fetch(`${base}/api/ai/queue`, { method: 'POST', headers: auth, body: JSON.stringify({ model: 'local-image', prompt: `p${i}`, width: 64, height: 64 }) })).json();
  const id = res.generations[0].generation_id;
  for (let t = 0; t < 2000 && !received.has(id); t += 2) await new Promise((r) => setTimeout(r, 2));
  const row = await prisma.generation.findUniqueOrThrow({ where: { id } });
  const event = await prisma.generationEvent.findUniqueOrThrow({ where: { generationId: id } });
  pickup.push(row.startedAt - row.enqueuedAt);
  // The outbox row is written in the terminal transaction; the event arrives after commit + publish.
  if (received.has(id)) delivery.push(received.get(id) - event.createdAt.getTime());
}
console.log(`enqueue -> processing (idle worker, n=${pickup.length}): p50 ${percentile(pickup, 0.5)} ms, p99 ${percentile(pickup, 0.99)} ms`);
console.log(`terminal -> event received (n=${delivery.length}): p50 ${percentile(delivery, 0.5)} ms, p99 ${percentile(delivery, 0.99)} ms`);
await worker.close();

// 2. Sustained enqueue throughput (no worker, so the queue only grows).
const duration = Number(process.env.BENCH_SECONDS ?? 8);
const { Metrics } = dist('libs/observability/src/index.js');
const gatewayMetrics = gateway.get(Metrics);
const stagesBefore = histogramTotals(await gatewayMetrics.registry.metrics());
const r = await autocannon({
  url: `${base}/api/ai/queue`,
  method: 'POST',
  connections: 50,
  duration,
  headers: auth,
  body: JSON.stringify({ model: 'local-image', prompt: 'throughput' }),
});
console.log(`enqueue through the gateway (50 connections, ${duration}s): ${Math.round(r.requests.average)} generations/s, p50 ${r.latency.p50} ms, p99 ${r.latency.p99} ms, non-2xx ${r.non2xx}, errors ${r.errors}   (target >= 2000/s, p99 <= 50 ms)`);
// The same connections on an authenticated read that touches neither Postgres nor Redis: the
// HTTP floor of this gateway and client, measured in the same run.
const floor = await autocannon({ url: `${base}/api/ai/models/local-image`, connections: 50, duration: Math.max(2, duration / 2), headers: auth });
console.log(`  beside it, an authenticated GET of a model (same connections): ${Math.round(floor.requests.average)} req/s, p50 ${floor.latency.p50} ms, p99 ${floor.latency.p99} ms`);
const stagesAfter = histogramTotals(await gatewayMetrics.registry.metrics());
console.log(`  gateway stages under that load, means in ms: ${stageLine(stagesBefore, stagesAfter, ['auth', 'queue.validate', 'queue.reserve', 'queue.rows', 'queue.dispatch'])}`);

// 3. Memory per idle SSE connection.
const n = Number(process.env.BENCH_SSE ?? 10000);
global.gc?.();
const before = process.memoryUsage();
const client = fork(fileURLToPath(import.meta.url), ['sse-client', `${base}/api/events`, user.api_key, String(n)], { stdio: 'inherit', execArgv: [...process.execArgv, ...dieWithBench] });
await new Promise((resolve) => client.once('message', resolve));
await new Promise((r) => setTimeout(r, 1000));
global.gc?.();
const after = process.memoryUsage();
const perConn = (after.rss - before.rss) / n;
const heapPer = (after.heapUsed - before.heapUsed) / n;
console.log(`${n} idle SSE connections: +${Math.round((after.rss - before.rss) / 1048576)} MiB RSS = ${(perConn / 1024).toFixed(1)} KB per connection (heap ${(heapPer / 1024).toFixed(1)} KB)   (target <= 20 KB)`);
if (process.env.BENCH_JSON)
  writeFileSync(
    process.env.BENCH_JSON,
    JSON.stringify(
      {
        bench: 'queue',
        machine: machine(),
        enqueue: { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors, floorRps: floor.requests.average, floorP99: floor.latency.p99 },
        pickup: { p50: percentile(pickup, 0.5), p99: percentile(pickup, 0.99) },
        sse: { connections: n, rssKbPerConnection: perConn / 1024, heapKbPerConnection: heapPer / 1024 },
      },
      null,
      2,
    ),
  );
client.kill();

await gateway.close();
await db.drop();
process.exit(0);
