#!/usr/bin/env node
// npm run bench:batch — what a running batch does to interactive traffic, and how fast a batch runs.
//
// One go, on this machine: a fake OpenAI-compatible upstream (answers after BENCH_UPSTREAM_MS, default 20 ms,
// as a model server takes time), the gateway, the chat service and a queue-worker running the batch pool
// (BATCH_WORKER_CONCURRENCY, default 8) as separate processes (compiled code, production settings) on a fresh
// database and Redis prefix. Each round (BENCH_ROUNDS, default 3):
//   1. interactive alone: BENCH_CONNECTIONS (default 8) clients send chat completions through the gateway for
//      BENCH_SECONDS (default 8): p50/p99 and requests/s;
//   2. the same while a BENCH_LINES-line batch (default 2,000) of the same model runs, half the clients in
//      the batch's namespace and half in another: p50/p99 and requests/s beside round 1's;
//   3. the batch's own pace: lines/s from in_progress to completed, beside the direct path: the same lines
//      sent straight to the upstream by BATCH_WORKER_CONCURRENCY clients (the pool's width).
// It prints every round and the medians. Then memory (BENCH_MEMORY_LINES, default 50,000; 0 skips it): a batch of a
// tenth of that and one of all of it, each process's RSS read from /proc every 500 ms while each runs: the peaks
// should match (nothing in a process grows with the file). BENCH_PODS=1 runs the gateway, the chat service and
// the queue-worker each in a memory cgroup of its manifest's limit (512Mi, 512Mi, and 1Gi for the image worker that
// runs the batch pool), with the manifests' NODE_OPTIONS, so V8 sizes its heap as in the pod; it prints each
// cgroup's peak, limit hits and OOM kills at the end. Needs root and a writable memory cgroup controller.
import fs from 'node:fs';
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { parseMemory, podCgroup, sweepStalePods } from './pod-memory.mjs';
import { BENCH_METRICS_TOKEN, benchCatalog, benchDatabase, spawnUntilReady, startFakeUpstream, benchRedisUrl, benchTempDir, buildAll, closedLoop, dieWithBench, freePort, machine, percentile } from './bench-env.mjs';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 8);
const LINES = Number(process.env.BENCH_LINES ?? 2000);
const MEMORY_LINES = Number(process.env.BENCH_MEMORY_LINES ?? 50_000);
const POOL = Number(process.env.BATCH_WORKER_CONCURRENCY ?? 8);
const UPSTREAM_MS = Number(process.env.BENCH_UPSTREAM_MS ?? 20);
const API_KEY = 'sk-bench-upstream';
const API_KEY_ENV = 'ATELIER_BENCH_UPSTREAM_KEY';
const ADMIN_TOKEN = randomBytes(32).toString('hex');

buildAll();
const db = await benchDatabase();
const children = [];
process.once('exit', () => children.forEach((c) => c.kill('SIGKILL')));

/** deploy/base: each service's memory limit and NODE_OPTIONS (BENCH_PODS). */
const POD_SHAPES = { gateway: ['512Mi', '--max-semi-space-size=32'], chat: ['512Mi', '--max-semi-space-size=32'], 'queue-worker': ['1Gi', ''] };
const PODS = process.env.BENCH_PODS === '1';
const pods = [];
if (PODS) sweepStalePods();
// The services die with the bench; a cgroup they have not left yet is swept by the next bench (sweepStalePods).
process.once('exit', () =>
  pods.forEach(({ pod }) => {
    try {
      pod.remove();
    } catch {
      // still holds a dying process
    }
  }),
);

function startNode(name, args, env, probe) {
  const shape = PODS ? POD_SHAPES[name] : undefined;
  const pod = shape ? podCgroup(name, parseMemory(shape[0])) : undefined;
  const program = [process.execPath, [...dieWithBench, ...args]];
  const [command, argv] = pod ? pod.wrap(...program) : program;
  const { child, ready } = spawnUntilReady(name, command, argv, { ...env, ...(shape && { NODE_OPTIONS: shape[1] }) }, probe);
  if (pod) pods.push({ name, pod });
  children.push(child);
  return ready;
}
const healthy = (port) => async () => (await fetch(`http://127.0.0.1:${port}/health`)).ok;

const upstreamUrl = await startFakeUpstream(startNode, API_KEY);
const upstreamModel = `delay-${UPSTREAM_MS}`;
const catalogDir = benchCatalog({ upstreamUrl, upstreamModel, apiKeyEnv: API_KEY_ENV, description: `The fake upstream, answering after ${UPSTREAM_MS} ms` });

const [gatewayPort, chatPort, workerPort] = [await freePort(), await freePort(), await freePort()];
const serviceEnv = {
  NODE_ENV: 'production',
  LOG_LEVEL: 'error',
  HOST: '127.0.0.1',
  DATABASE_URL: db.databaseUrl,
  REDIS_URL: benchRedisUrl,
  REDIS_PREFIX: db.prefix,
  ADMIN_TOKEN,
  URL_SIGNING_SECRET: randomBytes(32).toString('hex'),
  METRICS_TOKEN: BENCH_METRICS_TOKEN,
  STORAGE_DIR: benchTempDir('storage'),
  MODEL_CATALOG_DIR: catalogDir,
  [API_KEY_ENV]: API_KEY,
  BATCH_WORKER_CONCURRENCY: String(POOL),
};
const processes = await Promise.all([
  startNode('gateway', ['dist/local/apps/gateway/src/main.js'], { ...serviceEnv, PORT: String(gatewayPort) }, healthy(gatewayPort)),
  startNode('chat', ['dist/local/apps/chat/src/main.js'], { ...serviceEnv, CHAT_PORT: String(chatPort) }, healthy(chatPort)),
  startNode('queue-worker', ['dist/local/apps/queue-worker/src/main.js'], { ...serviceEnv, QUEUE_WORKER_PORT: String(workerPort), QUEUE_WORKER_POOLS: 'batch' }, healthy(workerPort)),
]);
const base = `http://127.0.0.1:${gatewayPort}`;
const sql = new pg.Client({ connectionString: db.databaseUrl });
await sql.connect();
const newUser = async (name) =>
  (await (await fetch(`${base}/api/admin/users`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ username: name, credits: '1000000' }) })).json()).api_key;
const batchKey = await newUser('bench-batch');
const otherKey = await newUser('bench-other');

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
function post(url, auth, body) {
  return new Promise((resolve, reject) => {
    const text = JSON.stringify(body);
    const req = http.request(url, { method: 'POST', agent, timeout: 30_000, headers: { authorization: auth, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) } }, (res) => {
      let out = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (out += d));
      res.on('end', () => (res.statusCode === 200 ? resolve(out) : reject(new Error(`HTTP ${res.statusCode}: ${out.slice(0, 200)}`))));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('no answer within 30 s')));
    req.end(text);
  });
}
const chatBody = (content) => ({ model: 'bench-remote', messages: [{ role: 'user', content }], max_tokens: 16 });
const interactive = (key) => () => post(`${base}/api/ai/chat/completions`, `Bearer ${key}`, chatBody('Say hello in one short sentence.'));
const direct = () => post(`${upstreamUrl}/chat/completions`, `Bearer ${API_KEY}`, { ...chatBody('Say hello in one short sentence.'), model: upstreamModel });

/** Half the clients in the batch's namespace, half in another, for SECONDS. */
async function interactiveLoad() {
  const [own, other] = await Promise.all([closedLoop(interactive(batchKey), Math.ceil(CONNECTIONS / 2), SECONDS), closedLoop(interactive(otherKey), Math.floor(CONNECTIONS / 2), SECONDS)]);
  const latencies = [...own.latencies, ...other.latencies];
  if (own.errors + other.errors > 0) throw new Error(`interactive requests failed: ${own.lastError ?? other.lastError}`);
  return { rps: own.rps + other.rps, p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99) };
}

async function startBatch(lines = LINES) {
  const jsonl = Array.from({ length: lines }, (_, i) => JSON.stringify({ custom_id: `l${i}`, method: 'POST', url: '/v1/chat/completions', body: chatBody(`line ${i}`) })).join('\n');
  const form = new FormData();
  form.append('purpose', 'batch');
  form.append('file', new Blob([jsonl]), 'bench.jsonl');
  const file = await (await fetch(`${base}/api/ai/files`, { method: 'POST', headers: { authorization: `Bearer ${batchKey}` }, body: form })).json();
  const batch = JSON.parse(await post(`${base}/api/ai/batches`, `Bearer ${batchKey}`, { input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }));
  const get = async () => (await fetch(`${base}/api/ai/batches/${batch.id}`, { headers: { authorization: `Bearer ${batchKey}` } })).json();
  for (;;) {
    const b = await get();
    if (b.status === 'in_progress') return { id: b.id, get, lines };
    if (b.status !== 'validating') throw new Error(`the batch is ${b.status}: ${JSON.stringify(b.errors)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
async function finished(batch) {
  for (;;) {
    const b = await batch.get();
    if (b.status === 'completed') {
      if (b.request_counts.completed !== batch.lines) throw new Error(`the batch answered ${b.request_counts.completed} of ${batch.lines}`);
      return b;
    }
    if (['failed', 'expired', 'cancelled'].includes(b.status)) throw new Error(`the batch ended ${b.status}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The direct path: LINES requests straight to the upstream by POOL clients; lines per second. */
async function directPace() {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: POOL }, async () => {
      while (next++ < LINES) await direct();
    }),
  );
  return LINES / ((performance.now() - started) / 1000);
}

console.log(`atelier batch benchmark — ${machine()}; upstream ${UPSTREAM_MS} ms per answer, ${LINES} lines, pool ${POOL}, ${CONNECTIONS} interactive clients, ${SECONDS} s per phase`);
// Warm-up: the paths compiled and the connections open.
await closedLoop(interactive(batchKey), 2, 2);
const rounds = [];
for (let round = 1; round <= ROUNDS; round++) {
  const alone = await interactiveLoad();
  const batch = await startBatch();
  const during = await interactiveLoad();
  await finished(batch);
  // From the first line's start to the last one's end, as the lines recorded them (ms precision).
  const uuid = batch.id.slice(6).replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5');
  const { rows } = await sql.query('SELECT extract(epoch from max(ended_at) - min(started_at))::float AS s FROM batch_lines WHERE batch_id = $1', [uuid]);
  const pace = LINES / rows[0].s;
  const directLinesPerSecond = await directPace();
  const r = { alone, during, pace, direct: directLinesPerSecond };
  rounds.push(r);
  console.log(
    `round ${round}: interactive alone p50 ${alone.p50.toFixed(1)} ms, p99 ${alone.p99.toFixed(1)} ms, ${alone.rps.toFixed(0)} req/s; ` +
      `during the batch p50 ${during.p50.toFixed(1)} ms (+${(during.p50 - alone.p50).toFixed(1)}), p99 ${during.p99.toFixed(1)} ms (+${(during.p99 - alone.p99).toFixed(1)}), ${during.rps.toFixed(0)} req/s; ` +
      `batch ${pace.toFixed(0)} lines/s (first line's start to last line's end) beside direct ${directLinesPerSecond.toFixed(0)} lines/s with ${POOL} clients`,
  );
}
const med = (f) => percentile(rounds.map(f), 0.5);
if (rounds.length > 0)
  console.log(
  `median of ${ROUNDS}: interactive p50 ${med((r) => r.alone.p50).toFixed(1)} -> ${med((r) => r.during.p50).toFixed(1)} ms (added ${med((r) => r.during.p50 - r.alone.p50).toFixed(1)} ms), ` +
    `p99 ${med((r) => r.alone.p99).toFixed(1)} -> ${med((r) => r.during.p99).toFixed(1)} ms; ` +
    `batch pace ${med((r) => r.pace).toFixed(0)} lines/s = ${(100 * med((r) => r.pace / r.direct)).toFixed(0)} % of direct`,
);
/** Resident set size of a process, from outside (kB). */
const rssKb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
const NAMES = ['gateway', 'chat', 'queue-worker'];
const PORTS = [gatewayPort, chatPort, workerPort];
/** The live JavaScript heap after the last full collection (MB), from each process's /metrics: what a leak grows. */
async function liveHeapMb() {
  return Promise.all(
    PORTS.map(async (port) => {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${BENCH_METRICS_TOKEN}` } })).text();
      return Number(/^atelier_heap_live_bytes\{[^}]*\} (\S+)$/m.exec(text)?.[1] ?? NaN) / 2 ** 20;
    }),
  );
}
/** One batch of `lines` from upload to completed, each process's RSS sampled meanwhile: before, peak and at the end (MB). */
async function memoryRun(lines) {
  const mb = (kb) => kb / 1024;
  const before = processes.map((c) => rssKb(c.pid));
  const peak = [...before];
  const timer = setInterval(() => processes.forEach((c, i) => (peak[i] = Math.max(peak[i], rssKb(c.pid)))), 500);
  const started = performance.now();
  let validated;
  try {
    const batch = await startBatch(lines);
    // Validation reads the file, writes every line and reserves their estimate in one transaction: its
    // transient peak is apart from what running the lines adds.
    validated = processes.map((c) => rssKb(c.pid));
    await finished(batch);
  } finally {
    clearInterval(timer);
  }
  const end = processes.map((c) => rssKb(c.pid));
  const seconds = (performance.now() - started) / 1000;
  const heap = await liveHeapMb();
  console.log(
    `memory, ${lines} lines in ${seconds.toFixed(0)} s: ` +
      NAMES.map((n, i) => `${n} RSS ${mb(before[i]).toFixed(0)} MB before, ${mb(validated[i]).toFixed(0)} MB once validated, ${mb(peak[i]).toFixed(0)} MB peak, ${mb(end[i]).toFixed(0)} MB at the end, live heap ${heap[i].toFixed(0)} MB`).join('; '),
  );
  return peak.map(mb);
}
if (MEMORY_LINES > 0) {
  const small = await memoryRun(Math.round(MEMORY_LINES / 10));
  const large = await memoryRun(MEMORY_LINES);
  console.log(`memory: peak RSS for ${MEMORY_LINES} lines minus the peak for ${Math.round(MEMORY_LINES / 10)}: ` + NAMES.map((n, i) => `${n} ${(large[i] - small[i]).toFixed(1)} MB`).join(', '));
}
for (const { name, pod } of pods) {
  const r = pod.report();
  console.log(`pod ${name} (${POD_SHAPES[name][0]}): cgroup peak ${(r.peakBytes / 2 ** 20).toFixed(0)} MiB over the whole run, limit hit ${r.limitHits} times, OOM kills ${r.oomKills}`);
}
await sql.end();
children.forEach((c) => c.kill('SIGKILL'));
await db.drop();
process.exit(0);
