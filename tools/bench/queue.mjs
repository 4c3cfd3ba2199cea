#!/usr/bin/env node
// npm run bench:queue — the async generation queue with Postgres and Redis on this machine:
// enqueue -> processing latency with idle workers, terminal -> event delivery latency,
// sustained enqueue throughput through the gateway, and memory per idle SSE connection.
import { fork, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { root } from '../bootstrap.mjs';
import { appEnvironment } from '../malloc-arenas.mjs';
import { benchConfig, benchDatabase, benchTempDir, buildAll, dieWithBench, dist, freePort, histogramTotals, machine, percentile, stageLine, startBenchGateway } from './bench-env.mjs';

if (process.argv[2] === 'sse-client') {
  // Child process: opens N idle event streams, spread over the users' keys, so the server's memory
  // is measured alone.
  const [url, keys, n] = [process.argv[3], process.argv[4].split(','), Number(process.argv[5])];
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  let open = 0;
  let reopened = 0;
  await new Promise((resolve) => {
    // A connection reset while 10,000 open at once (about one run in ten) is opened again, as
    // EventSource would, so the run goes on instead of waiting for it forever.
    const openOne = (i) =>
      http
        .get(url, { agent, headers: { authorization: `Bearer ${keys[i % keys.length]}` } }, (res) => {
          if (res.statusCode !== 200) {
            console.error(`an event stream was refused: ${res.statusCode}`);
            process.exit(1);
          }
          res.on('data', () => {});
          if (++open === n) resolve();
        })
        .on('error', (e) => {
          if (++reopened === 1) console.error(`an event stream failed while opening (${e.message}); opening it again`);
          setTimeout(() => openOne(i), 100);
        });
    for (let i = 0; i < n; i++) openOne(i);
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

// 3. Memory per idle SSE connection, as deployed: the events app in a fresh process of its own,
// the streams opened by another process for many users, the app's RSS read from /proc before they
// open and BENCH_SSE_SETTLE seconds after (keep-alives have then been written on every stream).
const n = Number(process.env.BENCH_SSE ?? 10000);
const sseUsers = Number(process.env.BENCH_SSE_USERS ?? 100);
const settle = Number(process.env.BENCH_SSE_SETTLE ?? 30);
const keys = [];
for (let i = 0; i < sseUsers; i++) {
  const res = await fetch(`${base}/api/admin/users`, {
    method: 'POST',
    headers: { authorization: `Bearer ${config.ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ username: `sse-${i}`, credits: 0 }),
  });
  if (res.status !== 201) throw new Error(`creating an SSE user failed: ${res.status} ${await res.text()}`);
  keys.push((await res.json()).api_key);
}
const eventsPort = await freePort();
const events = spawn(process.execPath, [...dieWithBench, 'dist/local/apps/events/src/main.js'], {
  cwd: root,
  // As npm start and the image start it (its V8 options included).
  env: appEnvironment('events', {
    ...process.env,
    NODE_ENV: 'production',
    LOG_LEVEL: 'error',
    HOST: '127.0.0.1',
    EVENTS_PORT: String(eventsPort),
    DATABASE_URL: db.databaseUrl,
    REDIS_URL: config.REDIS_URL,
    REDIS_PREFIX: config.REDIS_PREFIX,
    ADMIN_TOKEN: config.ADMIN_TOKEN,
    URL_SIGNING_SECRET: config.URL_SIGNING_SECRET,
    METRICS_TOKEN: config.METRICS_TOKEN,
    // Each user holds n / users streams on one key; the per-key cap is not what is measured.
    EVENTS_MAX_STREAMS_PER_KEY: String(Math.ceil(n / sseUsers)),
  }),
  stdio: ['ignore', 'inherit', 'inherit', 'pipe'],
});
for (let t = 0; ; t++) {
  if (events.exitCode !== null) throw new Error(`the events app exited with ${events.exitCode}`);
  if (await fetch(`http://127.0.0.1:${eventsPort}/health`).then((r) => r.ok, () => false)) break;
  await new Promise((r) => setTimeout(r, 100));
}
// One stream first, opened and closed, so the route's first-use cost (compiled code, pools) is not
// counted against the 10,000.
await new Promise((resolve, reject) => {
  const req = http.get(`http://127.0.0.1:${eventsPort}/api/events`, { headers: { authorization: `Bearer ${keys[0]}` } }, (res) => {
    res.destroy();
    resolve();
  });
  req.on('error', reject);
});
await new Promise((r) => setTimeout(r, 2000));
const rssOf = (pid) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) * 1024;
const before = rssOf(events.pid);
const client = fork(fileURLToPath(import.meta.url), ['sse-client', `http://127.0.0.1:${eventsPort}/api/events`, keys.join(','), String(n)], { stdio: 'inherit', execArgv: [...process.execArgv, ...dieWithBench] });
await new Promise((resolve) => client.once('message', resolve));
const opened = rssOf(events.pid);
await new Promise((r) => setTimeout(r, settle * 1000));
const after = rssOf(events.pid);
const perConn = (after - before) / n;
console.log(
  `${n} idle SSE connections (${sseUsers} users) on the events app in its own process: +${Math.round((after - before) / 1048576)} MiB RSS after ${settle} s = ${(perConn / 1024).toFixed(1)} KB per connection (${((opened - before) / n / 1024).toFixed(1)} KB once all were open)   (target <= 10 KB)`,
);
if (process.env.BENCH_JSON)
  writeFileSync(
    process.env.BENCH_JSON,
    JSON.stringify(
      {
        bench: 'queue',
        machine: machine(),
        enqueue: { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors, floorRps: floor.requests.average, floorP99: floor.latency.p99 },
        pickup: { p50: percentile(pickup, 0.5), p99: percentile(pickup, 0.99) },
        sse: { connections: n, users: sseUsers, settleSeconds: settle, rssKbPerConnection: perConn / 1024, openedKbPerConnection: (opened - before) / n / 1024 },
      },
      null,
      2,
    ),
  );
client.kill();
events.kill('SIGTERM');
await new Promise((r) => (events.exitCode !== null ? r() : events.once('exit', r)));

await gateway.close();
await db.drop();
process.exit(0);
