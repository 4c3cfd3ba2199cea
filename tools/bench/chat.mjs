#!/usr/bin/env node
// npm run bench:chat — what the gateway adds to a chat completion.
//
// One go, on this machine: a fake OpenAI-compatible upstream, the gateway and the chat service
// run as separate processes (compiled code, production settings) on a fresh database and Redis
// prefix. The same requests are sent to the upstream directly and through the gateway (API-key
// auth, validation, token counting, credit reservation and settlement, hand-off over a Redis
// stream to the chat service, upstream call, usage record), and the difference is reported:
//   0. one request at a time: the overhead itself, without any queueing, and the floor's (below) right after;
//      then the Responses API over the same upstream (added p50 beside chat completions' own), and embeddings
//      (inputs per second, 256 short strings per request, beside the upstream's own /embeddings);
//   1. added latency p50/p99 at a fixed 500 requests/s, non-streaming, and the floor's (below) at
//      the same rate right after, which says how much of the tail the topology has on this machine;
//   2. added time to the first streamed byte (p50/p99) at the same rate;
//   3. sustained throughput through the gateway (closed loop), with auth and billing on, checked
//      afterwards against the ledger (every request charged exactly once, nothing left reserved),
//      beside the floor: the same topology with nothing of atelier's on it but its ledger (floor.mjs);
//      direct, gateway and floor take turns (BENCH_LOOP_ROUNDS rounds, default 3), so their ratios hold
//      while the machine's speed drifts;
//   4. pathological inputs (1 and 10 MiB messages), with a probe request sent meanwhile;
//   5. one request at a time after several seconds idle (BENCH_IDLE_MS, default 6000; BENCH_IDLE_COUNT, default 6);
//   6. (alone, not by default: BENCH_PHASES=6) instructions per request in the gateway and the chat service beside
//      the floor's, counted by valgrind's callgrind: a figure machines and noise do not move (see the phase).
// Env: BENCH_SECONDS (per phase, default 10), BENCH_RATE (default 500), BENCH_CONNECTIONS (default 64),
// BENCH_TRACING=1 (the services export every span to an OTLP sink process: what tracing costs, against a run without; BENCH_TRACING_RATIO=0.1 samples that share of traces),
// BENCH_PHASES (default 0,1,2,3,4,5), BENCH_LOOP_ROUNDS (phase 3's turns, default 3), BENCH_CHAT_REPLICAS (chat processes, default 1), BENCH_PROFILE=gateway|chat (CPU profile into var/profiles, summarized at the end over the measured closed loop; BENCH_PROFILE_INTERVAL sets its sampling interval in µs),
// BENCH_SERVICE_FLAGS (extra node flags for the gateway and chat processes, e.g. V8 heap settings to try),
// BENCH_SERVICE_LOGS (a directory: each process's output in full, e.g. with BENCH_SERVICE_FLAGS=--trace-gc;
// `node tools/bench/gc-episodes.mjs <BENCH_TRACE file> <this dir>` then says which slow requests met a GC pause),
// BENCH_TRACE (a file: every fixed-rate request's send time and latency, one JSON line per run, with the offset
// from its epoch times to CLOCK_MONOTONIC, so `perf record -k CLOCK_MONOTONIC` timelines line up with it),
// BENCH_PERF (a file: phase 3's closed loop through the gateway recorded with `perf record -a`, then each
// process's share of the CPU and its hottest functions; see perf-profile.mjs for why beside BENCH_PROFILE;
// BENCH_PERF_PHASE=1 records phase 1's fixed rate through the gateway instead, where the batches are small;
// KEEP_MAPS=1 keeps the services' /tmp/perf-<pid>.map files for `perf report` on that file afterwards),
// BENCH_PROMPT_CHARS=<n> (a user message of n characters of prose instead of one short sentence),
// BENCH_FIRST_SECOND=1 (phase 1's stage means for its first second apart from the rest: one more scrape at 1 s),
// BENCH_WARM=<seconds> (phase 1 sends that much gateway traffic, at BENCH_WARM_RATE (default BENCH_RATE), before its
// measured run, then pauses BENCH_WARM_IDLE ms; neither is measured: an experiment on the first second's tail),
// BENCH_POD_MEMORY=<size, e.g. 512Mi> (the gateway and each chat process in a memory cgroup of that size, as in a pod
// with that limit; the peaks are printed at the end; pod-memory.mjs. Add the manifests' NODE_OPTIONS to
// BENCH_SERVICE_FLAGS to run what the pods run. Cgroups a killed run left behind are removed at the next one's start).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import pg from 'pg';
import { BENCH_METRICS_TOKEN, benchCatalog, benchDatabase, spawnUntilReady, startFakeUpstream, benchRedisUrl, metricsHeaders, benchTempDir, buildAll, dieWithBench, closedLoop as loop, closedLoopsInTurns, cpuPerRequest, cpuSeconds, fixed, hostCpuTicks, stealPercent, freePort, growth, machine, meanMs as meanOf, quantileMs, scrapeHistograms, serviceFlags } from './bench-env.mjs';
import { root } from '../bootstrap.mjs';
import { startSkeleton } from './floor.mjs';
import { formatCpuProfileSummary, summarizeCpuProfile } from './cpu-profile-summary.mjs';
import { perfAvailable, startPerf, summarizePerf } from './perf-profile.mjs';
import { parseMemory, peakRss, podCgroup, sweepStalePods } from './pod-memory.mjs';
import { callgrindAvailable, callgrindWrap, countFrom, instructionsDuring, partOf } from './callgrind.mjs';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const RATE = Number(process.env.BENCH_RATE ?? 500);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const PHASES = (process.env.BENCH_PHASES ?? '0,1,2,3,4,5').split(',');
// Phase 6 runs every service and skeleton process under callgrind (callgrind.mjs), about 30 times
// slower than without (a request one at a time: ~30 ms against ~1): every timed figure beside it would be false.
const COUNTING = PHASES.includes('6');
const COUNT_TOP = COUNTING ? Number(process.env.BENCH_COUNT_TOP ?? 0) : 0;
if (COUNTING && PHASES.length > 1) throw new Error('BENCH_PHASES=6 runs alone: under callgrind the services run about 30x slower, which would falsify every timed phase');
if (COUNTING && !callgrindAvailable()) throw new Error('BENCH_PHASES=6 needs valgrind (Debian package valgrind)');
const API_KEY_ENV = 'BENCH_UPSTREAM_API_KEY';
const API_KEY = 'sk-bench-upstream-key';
const ADMIN_TOKEN = randomBytes(32).toString('hex');

buildAll();
const db = await benchDatabase();
const children = [];
const POD_MEMORY = process.env.BENCH_POD_MEMORY ? parseMemory(process.env.BENCH_POD_MEMORY) : undefined;
/** The pod-sized memory cgroups (BENCH_POD_MEMORY) and the pid each holds, by process name and pid. */
const pods = new Map();
if (POD_MEMORY) {
  const stale = sweepStalePods();
  if (stale.removed.length) console.log(`removed ${stale.removed.length} memory cgroup(s) a killed bench left behind`);
  if (stale.kept.length) console.log(`left in place, processes still in them (a killed bench's services?): ${stale.kept.join(', ')}`);
}
const cleanup = async () => {
  for (const c of children) c.kill('SIGTERM');
  await Promise.all(children.map((c) => new Promise((r) => (c.exitCode !== null ? r() : c.once('exit', r)))));
  await db.drop().catch(() => undefined);
  // After the database: a cgroup that will not go (a process still in it) must not leave the database behind.
  for (const { pod } of pods.values()) pod.remove();
};
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => void cleanup().then(() => process.exit(130)));
process.on('exit', () => children.forEach((c) => c.kill('SIGKILL')));

// ---- processes -------------------------------------------------------------------------------
const callgrindDir = COUNTING ? benchTempDir('callgrind') : undefined;
/** Phase 6's wrapper (the services and the floor's processes under callgrind), else none. */
const counted = COUNTING ? callgrindWrap(callgrindDir) : undefined;
/** The pids of each kind of process, for the CPU each request costs it. */
const pidsOf = {};
/** Starts a Node process and resolves once `probe()` answers true (or rejects if the process exits first). */
function startNode(name, args, env, probe) {
  const pod = POD_MEMORY && name !== 'fake upstream' ? podCgroup(`${name}-${pidsOf[name]?.length ?? 0}`, POD_MEMORY) : undefined;
  const nodeArgs = [...dieWithBench, ...args];
  const program = counted && name !== 'fake upstream' ? counted(process.execPath, nodeArgs) : [process.execPath, nodeArgs];
  const [command, argv] = pod ? pod.wrap(...program) : program;
  const { child, ready } = spawnUntilReady(name, command, argv, env, probe);
  children.push(child);
  (pidsOf[name] ??= []).push(child.pid);
  if (pod) pods.set(`${name} ${child.pid}`, { pod, pid: child.pid });
  if (process.env.BENCH_SERVICE_LOGS) {
    fs.mkdirSync(process.env.BENCH_SERVICE_LOGS, { recursive: true });
    const log = fs.createWriteStream(path.join(process.env.BENCH_SERVICE_LOGS, `${name.replace(/ /g, '-')}-${child.pid}.log`));
    child.stdout.pipe(log);
    child.stderr.pipe(log);
  }
  return ready;
}

const healthy = (port) => async () => (await fetch(`http://127.0.0.1:${port}/health`)).ok;

const upstreamUrl = await startFakeUpstream(startNode, API_KEY);

// BENCH_TRACING=1: the gateway and the chat service export every span (100 % sampling, OTLP/HTTP
// protobuf, the default) to a collector stand-in of its own process that takes and counts them.
const TRACING = process.env.BENCH_TRACING === '1';
const sinkPort = TRACING ? await freePort() : undefined;
if (TRACING)
  await startNode(
    'otlp sink',
    [
      '-e',
      `let n = 0; require('node:http').createServer((q, r) => { q.on('data', () => {}); q.on('end', () => { n++; r.writeHead(q.url === '/stats' ? 200 : 200, { 'content-type': 'application/json' }).end(q.url === '/stats' ? JSON.stringify({ exports: n }) : '{}'); }); }).listen(${sinkPort}, '127.0.0.1')`,
    ],
    {},
    async () => (await fetch(`http://127.0.0.1:${sinkPort}/stats`)).ok,
  );

const catalogDir = benchCatalog({ upstreamUrl, upstreamModel: 'fixed', apiKeyEnv: API_KEY_ENV, description: 'The fake upstream, through the openai-compatible provider' });

fs.writeFileSync(
  path.join(catalogDir, 'bench-embed.json'),
  JSON.stringify({
    id: 'bench-embed',
    created: 1767225600,
    owned_by: 'bench',
    display_name: 'Bench embeddings',
    description: "The fake upstream's /embeddings, through the openai-compatible engine",
    endpoint: '/embeddings',
    capabilities: { input: ['text'], output: ['embedding'] },
    pricing: { method: 'token', input_cost_per_token: '0.0000001' },
    context_window: 8192,
    dimensions: 8,
    engine: { type: 'openai-compatible', base_url: upstreamUrl, upstream_model: 'embed', api_key_env: API_KEY_ENV },
    parameters: { type: 'object', properties: {} },
  }),
);

const PERF_FILE = process.env.BENCH_PERF;
const PERF_PHASE = process.env.BENCH_PERF_PHASE ?? '3';
if (PERF_FILE && !['1', '3'].includes(PERF_PHASE)) throw new Error('BENCH_PERF_PHASE: 1 or 3');
const perfIn = (phase) => (PERF_FILE && PERF_PHASE === phase ? startPerf(PERF_FILE) : undefined);
if (PERF_FILE && !perfAvailable()) throw new Error('BENCH_PERF: `perf record -a` does not run here (install linux-perf, or lower kernel.perf_event_paranoid)');
// BENCH_PROFILE=gateway|chat writes a V8 CPU profile of that process into var/profiles/, and the
// bench ends with its summary over the gateway's measured runs (phase 3's turns, else phase 1's run).
const PROFILED = process.env.BENCH_PROFILE;
const profileDir = path.join(root, 'var/profiles');
/** The measured runs, in the profile's clock (CLOCK_MONOTONIC µs). */
const profileWindows = { 1: [], 3: [] };
const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);
/** Marks a measured run's start for the profile's summary; the function returned marks its end. */
const profileWindow = (phase) => {
  const from = monotonicUs();
  return () => profileWindows[phase].push([from, monotonicUs()]);
};
const profile = (name) => [
  ...serviceFlags(),
  // perf names JavaScript frames from the map file this writes to /tmp, and so does phase 6 with BENCH_COUNT_TOP (callgrind.mjs' jitNames).
  ...(PERF_FILE || COUNT_TOP ? ['--perf-basic-prof'] : []),
  // Each log then starts with the process's time origin, which gc-episodes.mjs needs.
  ...(process.env.BENCH_SERVICE_LOGS ? [`--import=${pathToFileURL(path.join(root, 'tools/bench/time-origin.mjs')).href}`] : []),
  ...(PROFILED === name
    ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, ...(process.env.BENCH_PROFILE_INTERVAL ? [`--cpu-prof-interval=${process.env.BENCH_PROFILE_INTERVAL}`] : [])]
    : []),
];
const gatewayPort = await freePort();
const CHAT_REPLICAS = Number(process.env.BENCH_CHAT_REPLICAS ?? 1);
const chatPorts = await Promise.all(Array.from({ length: CHAT_REPLICAS }, () => freePort()));
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
  MODEL_CATALOG_DIR: catalogDir,
  [API_KEY_ENV]: API_KEY,
  ...(TRACING && {
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sinkPort}`,
    // BENCH_TRACING_RATIO=0.1: a tenth of the traces sampled (by trace id) instead of every one.
    ...(process.env.BENCH_TRACING_RATIO ? { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: process.env.BENCH_TRACING_RATIO } : { OTEL_TRACES_SAMPLER: 'always_on' }),
  }),
};
await Promise.all([
  startNode('gateway', [...profile('gateway'), 'dist/local/apps/gateway/src/main.js'], { ...serviceEnv, PORT: String(gatewayPort) }, healthy(gatewayPort)),
  ...chatPorts.map((port) => startNode('chat', [...profile('chat'), 'dist/local/apps/chat/src/main.js'], { ...serviceEnv, CHAT_PORT: String(port) }, healthy(port))),
]);
const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;

const user = await (
  await fetch(`${gatewayUrl}/api/admin/users`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ username: 'bench', credits: '1000000' }),
  })
).json();

// ---- load generation -------------------------------------------------------------------------
const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });
/**
 * BENCH_PROMPT_CHARS=<n>: a user message of n characters of English prose instead of one short
 * sentence, as prompts with a system prompt, a document or a conversation are; the gateway counts
 * every token of it before the hand-off. A fixed paragraph, so every run sends the same text.
 */
const PROSE =
  "The committee met on Tuesday to review the quarterly figures. Revenue rose by 12 percent, driven mostly by the new subscription plans, while costs stayed flat. " +
  "Several members asked whether the growth would last through the winter; the finance team's answer was cautious. They'll publish a detailed forecast next month, " +
  'with three scenarios and the assumptions behind each. Meanwhile, support tickets fell to 1,840 (from 2,310), and the average reply time is now under four hours.\n\n';
const PROMPT_CHARS = Number(process.env.BENCH_PROMPT_CHARS ?? 0);
const messages = [{ role: 'user', content: PROMPT_CHARS > 0 ? PROSE.repeat(Math.ceil(PROMPT_CHARS / PROSE.length)).slice(0, PROMPT_CHARS) : 'Say hello in one short sentence.' }];
const targets = {
  direct: { url: new URL(`${upstreamUrl}/chat/completions`), auth: `Bearer ${API_KEY}`, model: 'fixed' },
  gateway: { url: new URL(`${gatewayUrl}/api/ai/chat/completions`), auth: `Bearer ${user.api_key}`, model: 'bench-remote' },
};

/** One request; resolves with [time to first body byte, total time] in ms, or throws. */
function once(target, stream, headers = {}) {
  const body = JSON.stringify({ model: target.model, messages, max_tokens: 16, stream });
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      target.url,
      { method: 'POST', agent, timeout: 30_000, headers: { authorization: target.auth, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers } },
      (res) => {
        let first;
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => {
          first ??= performance.now() - started;
          text += d;
        });
        res.on('end', () => {
          if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}: ${text.slice(0, 200)}`));
          if (stream && !text.includes('data: [DONE]')) return reject(new Error('stream did not end with [DONE]'));
          resolve([first, performance.now() - started]);
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    // A request that never answers counts as an error instead of stalling the run.
    req.on('timeout', () => req.destroy(new Error('no answer within 30 s')));
    req.end(body);
  });
}

/** One JSON POST of any route; resolves with [time to first body byte, total time] in ms once a 200 is read to its end. */
function post(url, auth, body) {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: 'POST', agent, timeout: 30_000, headers: { authorization: auth, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        let first;
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => {
          first ??= performance.now() - started;
          text += d;
        });
        res.on('end', () => (res.statusCode === 200 ? resolve([first, performance.now() - started]) : reject(new Error(`HTTP ${res.statusCode}: ${text.slice(0, 200)}`))));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('no answer within 30 s')));
    req.end(body);
  });
}

/** Open loop at a fixed rate (requests are sent on schedule whether or not earlier ones finished). */
async function fixedRate(target, stream, rate, seconds, atOneSecond) {
  const total = Math.round(rate * seconds);
  /** [ms after the start when sent, time to first byte, total time, epoch ms when sent] of each answered request. */
  const trace = [];
  let errors = 0;
  const inflight = [];
  const started = performance.now();
  let split;
  for (let i = 0; i < total; i++) {
    if (atOneSecond && !split && i >= rate) split = atOneSecond();
    const due = started + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    const sent = performance.now();
    inflight.push(
      once(target, stream).then(
        ([first, all]) => void trace.push([sent - started, first, all, performance.timeOrigin + sent]),
        () => errors++,
      ),
    );
  }
  await Promise.all(inflight);
  if (split) await split;
  const achieved = total / ((performance.now() - started) / 1000);
  if (process.env.BENCH_TRACE) fs.appendFileSync(process.env.BENCH_TRACE, JSON.stringify({ target: target.model, stream, monotonicMsAtEpoch0: Number(process.hrtime.bigint()) / 1e6 - (performance.timeOrigin + performance.now()), trace }) + '\n');
  // The gateway and chat service sit idle through the direct run that comes first; the gateway
  // run's first second is reported apart from the steady state. Its tail is the services' first
  // burst since they started: every stage is slower in it, and 2 s of burst just before (BENCH_WARM)
  // take it away even with 10 s idle after, while 0.2 s of burst or 2 s at 50 req/s do not.
  const window = (pick, from, to = Infinity) => stats(trace.filter(([at]) => at >= from && at < to).map(pick));
  const ttfb = ([, first]) => first;
  const latency = ([, , all]) => all;
  return {
    ttfb: window(ttfb, 0),
    latency: window(latency, 0),
    firstSecond: { ttfb: window(ttfb, 0, 1000), latency: window(latency, 0, 1000) },
    afterFirstSecond: { ttfb: window(ttfb, 1000), latency: window(latency, 1000) },
    errors,
    achieved,
    ok: trace.length,
  };
}

/** Closed loop of non-streamed requests to `target` (bench-env's closedLoop), with latency percentiles. */
async function closedLoop(target, connections, seconds) {
  const { latencies, ...result } = await loop(() => once(target, false), connections, seconds);
  return { ...result, latency: stats(latencies) };
}

function stats(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const pct = (p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((sorted.length - 1) * p))] : NaN);
  return { n: sorted.length, p50: pct(0.5), p99: pct(0.99), max: sorted.length ? sorted[sorted.length - 1] : NaN };
}
const ms = (v) => `${v.toFixed(2)} ms`;
/** The added figure of a fixed-rate run, split into its first second (a burst after idle) and the rest (steady state). */
const splitLine = (direct, gateway, figure) => {
  const added = (part, p) => ms(gateway[part][figure][p] - direct[part][figure][p]);
  return (
    `     first second (after idle)  added p50 ${added('firstSecond', 'p50')}  p99 ${added('firstSecond', 'p99')}  max ${ms(gateway.firstSecond[figure].max)}   ` +
    `after it  added p50 ${added('afterFirstSecond', 'p50')}  p99 ${added('afterFirstSecond', 'p99')}`
  );
};

// ---- run -------------------------------------------------------------------------------------
/** BENCH_JSON=<file>: the headline figures for tools/bench/report.mjs (docs/benchmarks.md). */
const summary = {};
console.log(`atelier chat benchmark — ${machine()}; ${SECONDS}s per phase; gateway, chat service and fake upstream as separate processes${TRACING ? '; tracing ON (every span exported to an OTLP sink process)' : ''}`);
if (PROMPT_CHARS > 0) console.log(`   each request's user message: ${PROMPT_CHARS} characters of prose (BENCH_PROMPT_CHARS)`);
// Warm-up: JIT, connection pools, the auth cache, BullMQ's worker loop.
await closedLoop(targets.direct, 8, 2);
await closedLoop(targets.gateway, 8, 3);

/** One request at a time: the overhead itself, without any queueing. */
async function sequential(target, stream, count, headers = () => ({})) {
  const ttfb = [];
  const latency = [];
  for (let i = 0; i < count; i++) {
    const [first, all] = await once(target, stream, headers(i));
    ttfb.push(first);
    latency.push(all);
  }
  return { ttfb: stats(ttfb), latency: stats(latency) };
}

/** Histogram sums and counts (and event-loop gauges) of every process, from their /metrics, keyed by service. */
async function scrapeAll() {
  const out = new Map();
  for (const [service, port] of [['gateway', gatewayPort], ...chatPorts.map((p) => ['chat', p])])
    await scrapeHistograms(port, `${service} `, out);
  return out;
}

const f2 = fixed(2);
const f3 = fixed(3);

/**
 * The gateway's chat stages between two scrapes, as means per request (ms). A reservation either
 * runs before the hand-off or beside it (PaidRequests.mayOverlap); only the first kind, and the
 * max_concurrent slots taken before an overlapped one, add to the caller's wait, so they are
 * averaged over every request. Rate limits: the requests (guard) and tokens (chat) scripts.
 */
function gatewayStages(before, after) {
  const stage = (name) => meanOf(before, after, 'atelier_stage_duration_seconds', name, 'gateway ');
  const count = (label) => growth(before, after, `gateway atelier_stage_duration_seconds_count ${label}`);
  const [alone, beside] = [count('chat.reserve'), count('chat.reserve_overlapped')];
  const perRequest = (name) => (alone + beside > 0 ? ((Number.isFinite(stage(name)) ? stage(name) : 0) * count(name)) / (alone + beside) : NaN);
  return {
    reserve: perRequest('chat.reserve'),
    reserveBeside: stage('chat.reserve_overlapped'),
    slots: perRequest('chat.reserve_slots'),
    rateLimits: perRequest('rate_limit.requests') + perRequest('rate_limit.tokens'),
    besidePct: alone + beside ? ((100 * beside) / (alone + beside)).toFixed(0) : '-',
  };
}

/** Where the gateway's time went between two scrapes: per-stage means, the hand-off split, event-loop delay. */
function breakdown(before, after) {
  const meanMs = (b, a, service, metric, label) => meanOf(b, a, metric, label, `${service} `);
  const stage = (name) => meanMs(before, after, 'gateway', 'atelier_stage_duration_seconds', name);
  const http = meanMs(before, after, 'gateway', 'atelier_http_request_duration_seconds', '/api/ai/chat/completions');
  const [auth, validate, rpc, deliver, settle] = ['auth', 'chat.validate', 'chat.rpc', 'chat.deliver', 'chat.settle'].map(stage);
  const { reserve: reserveOnly, reserveBeside, slots, besidePct } = gatewayStages(before, after);
  const reserve = reserveOnly + (Number.isFinite(slots) ? slots : 0);
  const wait = meanMs(before, after, 'chat', 'atelier_job_wait_seconds', 'chat-completion');
  const handler = meanMs(before, after, 'chat', 'atelier_job_duration_seconds', 'chat-completion');
  const provider = meanMs(before, after, 'chat', 'atelier_stage_duration_seconds', 'chat.provider');
  console.log(`   where the gateway's time goes (means per non-streaming request, ms; settle runs after the answer is sent):`);
  console.log(
    `     gateway  auth ${f2(auth)}  validate+count ${f2(validate)}  reserve before the hand-off ${f2(reserve)} (${f2(reserveBeside)} beside it, for ${besidePct} % of requests)` +
      `  hand-off to answer ${f2(rpc)}  deliver ${f2(deliver)}  | settle ${f2(settle)}`,
  );
  console.log(`     inside the hand-off: wait until the chat service picks the job up ${f2(wait)}, handler ${f2(handler)} (provider call ${f2(provider)}), relay back ${f2(rpc - wait - handler)}`);
  // Tails: which stage's slowest 1 % is slow (bucket bounds, so "at most").
  const p99 = (service, metric, label) => {
    const v = quantileMs(before, after, metric, label, 0.99, `${service} `);
    return Number.isFinite(v) ? `<=${v < 1 ? v.toFixed(2) : v.toFixed(0)}` : '-';
  };
  const st = (label) => p99('gateway', 'atelier_stage_duration_seconds', label);
  console.log(
    `     p99 per stage (ms, bucket bound): auth ${st('auth')}  validate+count ${st('chat.validate')}  reserve ${st('chat.reserve')}/${st('chat.reserve_overlapped')} (before/beside)  hand-off ${st('chat.rpc')}` +
      ` (pick-up ${p99('chat', 'atelier_job_wait_seconds', 'chat-completion')}, handler ${p99('chat', 'atelier_job_duration_seconds', 'chat-completion')}, provider ${p99('chat', 'atelier_stage_duration_seconds', 'chat.provider')})` +
      `  deliver ${st('chat.deliver')}  | settle ${st('chat.settle')}`,
  );
  console.log(`     Nest/Fastify and the rest: ${f2(http - auth - validate - reserve - rpc - deliver)} of the ${f2(http)} the gateway's HTTP histogram counts`);
  // prom-client samples the loop every 10 ms and reports delays including that interval.
  const lag = (service, p) => after.get(`${service} nodejs_eventloop_lag_${p}_seconds `) * 1000 - 10;
  console.log(`     event-loop delay beyond the 10 ms sampling, p50/p99: gateway ${f2(lag('gateway', 'p50'))}/${f2(lag('gateway', 'p99'))}, chat ${f2(lag('chat', 'p50'))}/${f2(lag('chat', 'p99'))}`);
  // Pauses on the main thread, spread over the requests: young-generation collections grow with
  // what survives them (InFlightMap in libs/runtime says how requests once got promoted wholesale).
  const requests = growth(before, after, 'gateway atelier_http_request_duration_seconds_count /api/ai/chat/completions');
  const gc = (service, ...kinds) => f3((kinds.reduce((sum, kind) => sum + growth(before, after, `${service} nodejs_gc_duration_seconds_sum ${kind}`), 0) * 1000) / requests);
  // Incremental marking steps are old-generation work done ahead of its final pause.
  const young = (service) => gc(service, 'minor');
  const old = (service) => gc(service, 'major', 'incremental');
  console.log(`     GC pauses per request (ms), young/old generation: gateway ${young('gateway')}/${old('gateway')}, chat ${young('chat')}/${old('chat')}`);
}

// The load generator is this process; Postgres and Redis count every process of theirs.
const cpuGroups = { gateway: pidsOf.gateway, chat: pidsOf.chat, upstream: pidsOf['fake upstream'], postgres: 'postgres', redis: 'redis-server', client: [process.pid] };

/**
 * Runs one load, and says what CPU each process group (the gateway's, or `groups`) spent on it per
 * answered request, and what share of the machine's CPU time the hypervisor took meanwhile (`steal`, %).
 */
async function withCpu(run, groups = cpuGroups) {
  const before = cpuSeconds(groups);
  const host = hostCpuTicks();
  const result = await run();
  const steal = stealPercent(host, hostCpuTicks());
  return [result, { ...cpuPerRequest(before, cpuSeconds(groups), result.ok), steal }];
}

/** One line of the named runs' steal figures (withCpu, closedLoopsInTurns), each a share of the machine's CPU time. */
const stealLine = (runs) => `   steal (the machine's CPU time its hypervisor ran other guests in, a stall on every path alike): ${runs.map(([name, pct]) => `${name} ${pct.toFixed(1)} %`).join(', ')}`;

// The bench's own reads of its database (ledger checks, pg_stat_database), one connection.
const pool = new pg.Pool({ connectionString: db.databaseUrl, max: 1 });
// Interrupted (SIGINT, SIGTERM), cleanup's DROP DATABASE ... WITH (FORCE) ends this pool's idle
// connection: unhandled, that error killed the bench before it removed the run's Redis keys.
pool.on('error', () => undefined);

/**
 * The floor (bench:floor): the same topology built from the same libraries with nothing of
 * atelier's on it but its credit ledger, measured beside the gateway one request at a time
 * (phase 0), at a fixed rate (phase 1) and in the closed loop (phase 3). Started once, by the
 * first phase that needs it, on a namespace of its own (the billing check counts the bench
 * user's only), and stopped when the run ends.
 */
let floorStarted;
function theFloor() {
  floorStarted ??= (async () => {
    const skeleton = await startSkeleton({ port: await freePort(), prefix: `${db.prefix}-floor`, upstreamUrl: targets.direct.url.href, upstreamKey: API_KEY, databaseUrl: db.databaseUrl, wrap: counted });
    const target = { url: new URL(skeleton.url), auth: '', model: 'fixed' };
    await closedLoop(target, 8, 2);
    return { skeleton, target, groups: { ...cpuGroups, gateway: skeleton.pids.gateway, chat: skeleton.pids.worker } };
  })();
  return floorStarted;
}

if (PHASES.includes('0')) {
  const n = 400;
  // Started (and warmed) before anything is measured, so its start-up traffic falls in no run.
  const floor = await theFloor();
  const [dp, cpuDp] = await withCpu(async () => ({ ...(await sequential(targets.direct, false, n)), ok: n }));
  // Scraping also resets the event-loop delay histograms, so the readings after cover this run only.
  const before = await scrapeAll();
  const [gp, cpuGp] = await withCpu(async () => ({ ...(await sequential(targets.gateway, false, n)), ok: n }));
  const after = await scrapeAll();
  // The same requests one at a time through the floor (the topology with nothing of atelier's on
  // it but its ledger): how much of the added tail six processes on these cores have by themselves.
  const [fp, cpuFp] = await withCpu(async () => ({ ...(await sequential(floor.target, false, n)), ok: n }), floor.groups);
  const [ds, gs] = [await sequential(targets.direct, true, n), await sequential(targets.gateway, true, n)];
  // Idempotency-Key: a new key per request (claimed, run, answer stored), then retries of one key (replayed).
  const beforeKeyed = await scrapeAll();
  const keyed = await sequential(targets.gateway, false, n, (i) => ({ 'idempotency-key': `bench-${process.pid}-${i}` }));
  const afterKeyed = await scrapeAll();
  const idemStage = (name) => meanOf(beforeKeyed, afterKeyed, 'atelier_stage_duration_seconds', name, 'gateway ');
  const replayed = await sequential(targets.gateway, false, n, () => ({ 'idempotency-key': `bench-${process.pid}-0` }));
  Object.assign(summary, {
    sequential: {
      direct: dp.latency.p50,
      gateway: gp.latency.p50,
      addedP50: gp.latency.p50 - dp.latency.p50,
      addedP99: gp.latency.p99 - dp.latency.p99,
      floorAddedP50: fp.latency.p50 - dp.latency.p50,
      floorAddedP99: fp.latency.p99 - dp.latency.p99,
      stealPercent: cpuGp.steal,
      floorStealPercent: cpuFp.steal,
    },
    sequentialStream: { direct: ds.ttfb.p50, gateway: gs.ttfb.p50, addedP50: gs.ttfb.p50 - ds.ttfb.p50 },
  });
  console.log(`\n0. One request at a time (${n} each): the overhead without queueing`);
  console.log(`   non-streaming  direct p50 ${ms(dp.latency.p50)} p99 ${ms(dp.latency.p99)}   gateway p50 ${ms(gp.latency.p50)} p99 ${ms(gp.latency.p99)}   added p50 ${ms(gp.latency.p50 - dp.latency.p50)}`);
  // One request in flight: a woken thread waits for a core only behind another process's slice or the machine's own work.
  console.log(`   CPU per request, non-streaming through the gateway: ${cpuGp.line}`);
  console.log(
    `   the floor (bench:floor's skeleton, after the gateway)  p50 ${ms(fp.latency.p50)} p99 ${ms(fp.latency.p99)}   added p50 ${ms(fp.latency.p50 - dp.latency.p50)} p99 ${ms(fp.latency.p99 - dp.latency.p99)}` +
      `   (the gateway's added p99 ${ms(gp.latency.p99 - dp.latency.p99)})`,
  );
  console.log(`   CPU per request, the floor: ${cpuFp.line}`);
  console.log(`   wake-ups per request, one at a time: through the gateway ${cpuGp.wakeupLine}  = ${cpuGp.wakeupTotal.toFixed(1)};  the floor ${cpuFp.wakeupLine}  = ${cpuFp.wakeupTotal.toFixed(1)}`);
  console.log(`   waiting for a CPU, non-streaming: direct ${cpuDp.runWaitTotal.toFixed(3)} ms per request; through the gateway ${cpuGp.runWaitLine}`);
  console.log(stealLine([['direct run', cpuDp.steal], ['gateway run', cpuGp.steal], ['floor run', cpuFp.steal]]));
  console.log(`   streaming TTFB direct p50 ${ms(ds.ttfb.p50)} p99 ${ms(ds.ttfb.p99)}   gateway p50 ${ms(gs.ttfb.p50)} p99 ${ms(gs.ttfb.p99)}   added p50 ${ms(gs.ttfb.p50 - ds.ttfb.p50)}`);
  console.log(
    `   with Idempotency-Key   new key each request p50 ${ms(keyed.latency.p50)} (added over no key ${ms(keyed.latency.p50 - gp.latency.p50)}; means: claim ${f2(idemStage('idempotency.claim'))}, answer stored ${f2(idemStage('idempotency.store'))})   replayed p50 ${ms(replayed.latency.p50)}`,
  );
  summary.idempotency = { keyedP50: keyed.latency.p50, addedOverPlainP50: keyed.latency.p50 - gp.latency.p50, replayP50: replayed.latency.p50 };
  // Governance on the hot path, one level per user (namespace limits are shared by a user's keys),
  // each called with a self-service key limited to the chat scope, limits far above this rate:
  //  - rpm: scope check and one Redis script per request (key and namespace requests per minute);
  //  - + tpm and max_concurrent: a second GCRA script (tokens, corrected at settle) and the
  //    concurrency slot taken and given back (key and namespace);
  //  - + a budget: the reservation also locks and checks the key's row (and skips group commit).
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };
  const governedKey = async (username, namespaceLimits, key) => {
    const user = await (await fetch(`${gatewayUrl}/api/admin/users`, { method: 'POST', headers: admin, body: JSON.stringify({ username, credits: '1000' }) })).json();
    await fetch(`${gatewayUrl}/api/admin/namespaces/${username}/limits`, { method: 'PUT', headers: admin, body: JSON.stringify(namespaceLimits) });
    const made = await fetch(`${gatewayUrl}/api/api_keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${user.api_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bench', scopes: ['chat'], ...key }),
    });
    if (made.status !== 201) throw new Error(`making the ${username} key: ${made.status} ${await made.text()}`);
    return (await made.json()).api_key;
  };
  const everything = { rpm: 1_000_000, tpm: 1_000_000_000, max_concurrent: 10_000 };
  const levels = [
    ['rpm', await governedKey('bench-governed', { rpm: 1_000_000 }, { limits: { rpm: 1_000_000 } })],
    ['rpm + tpm + max_concurrent', await governedKey('bench-limited', everything, { limits: everything })],
    ['all + budget', await governedKey('bench-budgeted', everything, { limits: everything, budget: { max_spend: '100000', period: 'month' } })],
  ];
  const plainAgain = await sequential(targets.gateway, false, n);
  summary.governance = { plainP50: plainAgain.latency.p50, levels: {} };
  console.log(`   with governance (self-service key with the chat scope; added over the unlimited key, same run, p50 ${ms(plainAgain.latency.p50)}):`);
  for (const [name, key] of levels) {
    const scraped = await scrapeAll();
    const governed = await sequential({ ...targets.gateway, auth: `Bearer ${key}` }, false, n);
    const { rateLimits, slots, reserve, besidePct } = gatewayStages(scraped, await scrapeAll());
    console.log(
      `     ${name.padEnd(28)} p50 ${ms(governed.latency.p50)}  added ${ms(governed.latency.p50 - plainAgain.latency.p50)}` +
        `   (means: rate limits ${f2(rateLimits)}, max_concurrent slots ${f2(slots)}, reserve before the hand-off ${f2(reserve)}, beside it for ${besidePct} % of requests)`,
    );
    summary.governance.levels[name] = { p50: governed.latency.p50, addedP50: governed.latency.p50 - plainAgain.latency.p50 };
  }
  // The report's figure: every check together.
  summary.governance.p50 = summary.governance.levels['all + budget'].p50;
  summary.governance.addedP50 = summary.governance.levels['all + budget'].addedP50;

  // The Responses API over the same upstream: the same chat lifecycle behind a translation both ways,
  // not stored and stored (one more insert before the answer), beside chat completions and the
  // direct upstream measured again in the same window.
  const responsesUrl = new URL(`${gatewayUrl}/api/ai/responses`);
  const responsesBody = (store) => JSON.stringify({ model: 'bench-remote', input: messages[0].content, max_output_tokens: 16, store });
  const timedSeq = async (send) => {
    const latency = [];
    for (let i = 0; i < n; i++) latency.push((await send())[1]);
    return stats(latency);
  };
  const directAgain = (await sequential(targets.direct, false, n)).latency;
  const chatAgain = (await sequential(targets.gateway, false, n)).latency;
  const responses = await timedSeq(() => post(responsesUrl, targets.gateway.auth, responsesBody(false)));
  const responsesStored = await timedSeq(() => post(responsesUrl, targets.gateway.auth, responsesBody(true)));
  // Chat completions kept as stored completions (store: true with metadata): one insert before the answer.
  const storedChatBody = JSON.stringify({ model: 'bench-remote', messages, max_tokens: 16, store: true, metadata: { bench: 'chat' } });
  const chatStored = await timedSeq(() => post(targets.gateway.url, targets.gateway.auth, storedChatBody));
  summary.storedCompletions = { direct: directAgain.p50, chatAddedP50: chatAgain.p50 - directAgain.p50, addedP50: chatStored.p50 - directAgain.p50 };
  summary.responses = {
    direct: directAgain.p50,
    chatAddedP50: chatAgain.p50 - directAgain.p50,
    addedP50: responses.p50 - directAgain.p50,
    storedAddedP50: responsesStored.p50 - directAgain.p50,
  };
  console.log(
    `   Responses API, non-streamed, same upstream  p50 ${ms(responses.p50)}  added ${ms(responses.p50 - directAgain.p50)}` +
      `   stored (store: true) added ${ms(responsesStored.p50 - directAgain.p50)}   beside chat completions' own added ${ms(chatAgain.p50 - directAgain.p50)} (direct p50 ${ms(directAgain.p50)})`,
  );
  console.log(
    `   chat completions with store: true (a stored completion)  p50 ${ms(chatStored.p50)}  added ${ms(chatStored.p50 - directAgain.p50)}` +
      `   beside not stored ${ms(chatAgain.p50 - directAgain.p50)} (direct p50 ${ms(directAgain.p50)})`,
  );

  // Anthropic's Messages API, streamed, over the same upstream: the chat lifecycle behind a
  // translation both ways (Messages to chat, chunks to Anthropic's events). Requests alternate with
  // streamed chat completions and the direct upstream, one at a time, so all three see the same
  // machine; each figure is the whole stream read to its end.
  const chatStreamBody = JSON.stringify({ model: 'bench-remote', messages, max_tokens: 16, stream: true });
  const directStreamBody = JSON.stringify({ model: targets.direct.model, messages, max_tokens: 16, stream: true });
  const messagesStreamBody = JSON.stringify({ model: 'bench-remote', messages, max_tokens: 16, stream: true });
  const streamed = { direct: [], chat: [], messages: [] };
  for (let i = 0; i < n; i++) {
    streamed.direct.push((await post(targets.direct.url, targets.direct.auth, directStreamBody))[1]);
    streamed.chat.push((await post(targets.gateway.url, targets.gateway.auth, chatStreamBody))[1]);
    streamed.messages.push((await post(new URL(`${gatewayUrl}/api/anthropic/v1/messages`), targets.gateway.auth, messagesStreamBody))[1]);
  }
  const [sd, sc, sm] = [stats(streamed.direct), stats(streamed.chat), stats(streamed.messages)];
  summary.messages = { direct: sd.p50, chatAddedP50: sc.p50 - sd.p50, addedP50: sm.p50 - sd.p50, overChatP50: sm.p50 - sc.p50 };
  console.log(
    `   Messages API (/api/anthropic/v1/messages), streamed, same upstream  p50 ${ms(sm.p50)}  added ${ms(sm.p50 - sd.p50)}` +
      `   beside streamed chat completions' added ${ms(sc.p50 - sd.p50)} (over chat ${ms(sm.p50 - sc.p50)}; direct p50 ${ms(sd.p50)})`,
  );

  // Embeddings: 256 short strings per request (the SDK's default base64), closed loops taking turns
  // with the upstream's own /embeddings, reported as inputs per second.
  const inputs = Array.from({ length: 256 }, (_, i) => `short document number ${i} about the quarterly figures`);
  const embedLoops = {
    direct: () => post(new URL(`${upstreamUrl}/embeddings`), `Bearer ${API_KEY}`, JSON.stringify({ model: 'embed', input: inputs, encoding_format: 'float' })),
    gateway: () => post(new URL(`${gatewayUrl}/api/ai/embeddings`), targets.gateway.auth, JSON.stringify({ model: 'bench-embed', input: inputs, encoding_format: 'base64' })),
  };
  const embedRates = { direct: [], gateway: [] };
  for (let round = 0; round < 3; round++)
    for (const [name, send] of Object.entries(embedLoops)) {
      const run = await loop(send, 8, 2);
      if (run.errors) throw new Error(`embeddings ${name}: ${run.errors} errors (${run.lastError})`);
      embedRates[name].push(run.rps * inputs.length);
    }
  const medianOf = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  summary.embeddings = { direct: medianOf(embedRates.direct), gateway: medianOf(embedRates.gateway) };
  summary.embeddings.percentOfDirect = (100 * summary.embeddings.gateway) / summary.embeddings.direct;
  console.log(
    `   embeddings, 256 short strings per request, 8 connections (3 turns each)  through the gateway ${Math.round(summary.embeddings.gateway).toLocaleString('en')} inputs/s` +
      `   direct ${Math.round(summary.embeddings.direct).toLocaleString('en')} inputs/s (${summary.embeddings.percentOfDirect.toFixed(1)} %)`,
  );
  breakdown(before, after);
}

/** Postgres's own counts for the bench database (pg_stat_database; it reports up to a second late). */
const pgStats = async () =>
  (await pool.query(`SELECT xact_commit::int AS commits, tup_inserted::int AS inserted, tup_updated::int AS updated, tup_fetched::int AS fetched FROM pg_stat_database WHERE datname = current_database()`)).rows[0];
// Redis's own count of each command (the whole server: run the bench alone).
const redis = new Redis(serviceEnv.REDIS_URL, { lazyConnect: true });
const redisStats = async () =>
  Object.fromEntries([...(await redis.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)].map(([, cmd, calls]) => [cmd, Number(calls)]));

/** What each answered request cost Postgres and Redis between two pgStats and redisStats. */
function storeLines(pg0, pg1, redis0, redis1, answered) {
  const perReq = (k) => ((pg1[k] - pg0[k]) / answered).toFixed(2);
  console.log(`   Postgres per request: ${perReq('commits')} commits, ${perReq('inserted')} rows inserted, ${perReq('updated')} updated, ${perReq('fetched')} fetched`);
  const redisPerRequest = Object.entries(redis1)
    .map(([cmd, calls]) => [cmd, (calls - (redis0[cmd] ?? 0)) / answered])
    .filter(([cmd, n]) => n >= 0.005 && cmd !== 'info')
    .sort((a, b) => b[1] - a[1]);
  console.log(
    `   Redis per request: ${redisPerRequest.reduce((sum, [, n]) => sum + n, 0).toFixed(2)} commands (${redisPerRequest.map(([cmd, n]) => `${cmd} ${n.toFixed(2)}`).join(', ')})`,
  );
}

/** The /tmp/perf-<pid>.map files --perf-basic-prof had the services write (BENCH_PERF, BENCH_COUNT_TOP), unless KEEP_MAPS. */
function removePerfMaps() {
  if (!process.env.KEEP_MAPS) for (const pid of [...pidsOf.gateway, ...pidsOf.chat]) fs.rmSync(`/tmp/perf-${pid}.map`, { force: true });
}

/** BENCH_PERF's summary, while the services still run (their threads are looked up in /proc). */
function reportPerf() {
  if (!PERF_FILE) return;
  console.log('   pids', JSON.stringify(pidsOf));
  summarizePerf(PERF_FILE, { gateway: pidsOf.gateway, chat: pidsOf.chat, upstream: pidsOf['fake upstream'], client: [process.pid], postgres: 'postgres', redis: 'redis-server' });
  removePerfMaps();
}

if (PHASES.includes('1')) {
const [directPlain, cpuDirect] = await withCpu(() => fixedRate(targets.direct, false, RATE, SECONDS));
// An experiment on the first second's tail: gateway traffic before the measured run, then a pause.
if (process.env.BENCH_WARM) await fixedRate(targets.gateway, false, Number(process.env.BENCH_WARM_RATE ?? RATE), Number(process.env.BENCH_WARM));
if (process.env.BENCH_WARM_IDLE) await new Promise((r) => setTimeout(r, Number(process.env.BENCH_WARM_IDLE)));
const before = await scrapeAll();
const [pg0, redis0] = [await pgStats(), await redisStats()];
const stopPerf = await perfIn('1');
let atOneSecond;
const endWindow = profileWindow(1);
const [gatewayPlain, cpuThrough] = await withCpu(() => fixedRate(targets.gateway, false, RATE, SECONDS, process.env.BENCH_FIRST_SECOND ? async () => (atOneSecond = await scrapeAll()) : undefined));
endWindow();
await stopPerf?.();
const after = await scrapeAll();
// The statistics collector reports with a delay of up to a second.
await new Promise((r) => setTimeout(r, 1100));
const [pg1, redis1] = [await pgStats(), await redisStats()];
// The same rate through the floor, after the gateway's statistics are taken: how much of the
// tail the topology itself has on this machine (six processes on its cores), as phase 3's floor
// says for the rate.
const floor = await theFloor();
const [floorPlain, cpuFloor] = await withCpu(() => fixedRate(floor.target, false, RATE, SECONDS), floor.groups);
console.log(`\n1. Non-streaming at ${RATE} req/s (achieved: direct ${directPlain.achieved.toFixed(0)}, gateway ${gatewayPlain.achieved.toFixed(0)} req/s)`);
console.log(`   direct to upstream   p50 ${ms(directPlain.latency.p50)}  p99 ${ms(directPlain.latency.p99)}  errors ${directPlain.errors}`);
console.log(`   through the gateway  p50 ${ms(gatewayPlain.latency.p50)}  p99 ${ms(gatewayPlain.latency.p99)}  errors ${gatewayPlain.errors}`);
console.log(`   ADDED LATENCY        p50 ${ms(gatewayPlain.latency.p50 - directPlain.latency.p50)}  p99 ${ms(gatewayPlain.latency.p99 - directPlain.latency.p99)}   (target p50 <= 3 ms, p99 <= 15 ms)`);
console.log(splitLine(directPlain, gatewayPlain, 'latency'));
console.log(
  `   the floor (bench:floor's skeleton, after the gateway)  p50 ${ms(floorPlain.latency.p50)}  p99 ${ms(floorPlain.latency.p99)}  errors ${floorPlain.errors}` +
    `   added p50 ${ms(floorPlain.latency.p50 - directPlain.latency.p50)}  p99 ${ms(floorPlain.latency.p99 - directPlain.latency.p99)}` +
    `  (after its first second ${ms(floorPlain.afterFirstSecond.latency.p99 - directPlain.afterFirstSecond.latency.p99)})`,
);
// At a steady rate the batches are small, so per-statement and per-wake-up costs show here rather than in phase 3.
console.log(`   CPU per request, direct:        ${cpuDirect.line}`);
console.log(`   CPU per request, through:       ${cpuThrough.line}`);
console.log(`   wake-ups per request, through:  ${cpuThrough.wakeupLine}`);
// Six processes on the machine's cores: time a woken thread spent waiting for a core, beside the direct path's.
console.log(`   waiting for a CPU, direct:      ${cpuDirect.runWaitLine}`);
console.log(`   waiting for a CPU, through:     ${cpuThrough.runWaitLine}`);
console.log(`   CPU per request, floor:         ${cpuFloor.line}`);
console.log(`   reads/writes per request (system calls), through: ${cpuThrough.syscallLine}`);
console.log(`   reads/writes per request (system calls), floor:   ${cpuFloor.syscallLine}`);
console.log(`   waiting for a CPU, floor:       ${cpuFloor.runWaitLine}`);
console.log(stealLine([['direct run', cpuDirect.steal], ['gateway run', cpuThrough.steal], ['floor run', cpuFloor.steal]]));
storeLines(pg0, pg1, redis0, redis1, gatewayPlain.ok);
summary.rate = {
  rate: RATE,
  direct: directPlain.latency,
  gateway: gatewayPlain.latency,
  addedP50: gatewayPlain.latency.p50 - directPlain.latency.p50,
  addedP99: gatewayPlain.latency.p99 - directPlain.latency.p99,
  firstSecondAddedP99: gatewayPlain.firstSecond.latency.p99 - directPlain.firstSecond.latency.p99,
  afterFirstSecondAddedP99: gatewayPlain.afterFirstSecond.latency.p99 - directPlain.afterFirstSecond.latency.p99,
  errors: gatewayPlain.errors,
  cpu: { direct: Object.fromEntries(cpuDirect.parts), gateway: Object.fromEntries(cpuThrough.parts) },
  cpuPerRequest: cpuThrough.total,
  directCpuPerRequest: cpuDirect.total,
  wakeupsPerRequest: cpuThrough.wakeupTotal,
  directWakeupsPerRequest: cpuDirect.wakeupTotal,
  runWaitPerRequest: cpuThrough.runWaitTotal,
  directRunWaitPerRequest: cpuDirect.runWaitTotal,
  stealPercent: cpuThrough.steal,
  floor: {
    latency: floorPlain.latency,
    addedP50: floorPlain.latency.p50 - directPlain.latency.p50,
    addedP99: floorPlain.latency.p99 - directPlain.latency.p99,
    afterFirstSecondAddedP99: floorPlain.afterFirstSecond.latency.p99 - directPlain.afterFirstSecond.latency.p99,
    errors: floorPlain.errors,
    cpuPerRequest: cpuFloor.total,
    runWaitPerRequest: cpuFloor.runWaitTotal,
    stealPercent: cpuFloor.steal,
  },
};
if (atOneSecond) {
  console.log('   first second:');
  breakdown(before, atOneSecond);
  console.log('   after it:');
  breakdown(atOneSecond, after);
} else breakdown(before, after);
if (PERF_PHASE === '1') reportPerf();
}

if (PHASES.includes('2')) {
const directStream = await fixedRate(targets.direct, true, RATE, SECONDS);
const gatewayStream = await fixedRate(targets.gateway, true, RATE, SECONDS);
console.log(`\n2. Streaming at ${RATE} req/s, time to first byte`);
console.log(`   direct to upstream   p50 ${ms(directStream.ttfb.p50)}  p99 ${ms(directStream.ttfb.p99)}  errors ${directStream.errors}`);
console.log(`   through the gateway  p50 ${ms(gatewayStream.ttfb.p50)}  p99 ${ms(gatewayStream.ttfb.p99)}  errors ${gatewayStream.errors}`);
console.log(`   ADDED TTFB           p50 ${ms(gatewayStream.ttfb.p50 - directStream.ttfb.p50)}  p99 ${ms(gatewayStream.ttfb.p99 - directStream.ttfb.p99)}   (target p50 <= 3 ms)`);
console.log(splitLine(directStream, gatewayStream, 'ttfb'));
summary.rateStream = { rate: RATE, direct: directStream.ttfb.p50, gateway: gatewayStream.ttfb.p50, addedP50: gatewayStream.ttfb.p50 - directStream.ttfb.p50, errors: gatewayStream.errors };
}

/**
 * The chat reservations' state once every one is closed with its record (the chat_usage view's
 * row), waiting for at most 5 s: settles land just after the answers, and may linger up to 10 ms
 * for company (BatchedCreditLedger), so the last answers of a phase are not yet charged when the
 * client has them.
 */
async function ledgerSettled() {
  const state = async () =>
    (await pool.query(`SELECT count(*) FILTER (WHERE status = 'settled')::int AS settled, count(*) FILTER (WHERE status <> 'open')::int AS closed,
                              count(*) FILTER (WHERE status = 'open')::int AS open, (SELECT count(*)::int FROM chat_usage) AS usage
                       FROM credit_reservations WHERE reference LIKE 'chat:%'`)).rows[0];
  const started = performance.now();
  let ledger = await state();
  while ((ledger.open > 0 || ledger.usage !== ledger.closed) && performance.now() - started < 5000) {
    await new Promise((r) => setTimeout(r, 100));
    ledger = await state();
  }
  return { ledger, settledIn: performance.now() - started };
}

if (PHASES.includes('3')) {
// The balance phase 3 is charged against: read once the earlier phases' last settles have landed.
await ledgerSettled();
const before = (await pool.query(`SELECT credits::text FROM namespaces WHERE name = 'bench'`)).rows[0].credits;
const { target: floorTarget, groups: floorGroups } = await theFloor();

// The three closed loops take turns (closedLoopsInTurns: the rows that matter are ratios of their
// rates, and a shared VM's speed drifts over a run's minute; the direct rate alone went from 9,400
// to 16,700 req/s between runs of one session). Postgres and Redis statistics are taken around
// the gateway's turns only, after the previous turn's statements have reached the statistics
// collector (which reports up to a second late); the gateway's metrics are scraped around its
// turns too (the event-loop delay is its last turn's: scraping resets it). BENCH_PERF records a
// single turn.
const ROUNDS = PERF_FILE && PERF_PHASE === '3' ? 1 : Number(process.env.BENCH_LOOP_ROUNDS ?? 3);
const pgSum = {};
const redisSum = {};
let scraped;
let scrapedAfter;
/** The statistics collector reports up to a second late. */
const collectorCatchUp = () => new Promise((r) => setTimeout(r, 1100));
/** Before each turn, what the gateway's turn is measured by; after it, a pause for the statistics collector. */
const aroundTurn = async (name) => {
  if (name !== 'gateway') return collectorCatchUp;
  const s0 = await scrapeAll();
  scraped ??= s0;
  const [pg0, redis0] = [await pgStats(), await redisStats()];
  const stopPerf = await perfIn('3');
  const endWindow = profileWindow(3);
  return async () => {
    endWindow();
    await stopPerf?.();
    scrapedAfter = await scrapeAll();
    await ledgerSettled();
    await collectorCatchUp();
    const [pg1, redis1] = [await pgStats(), await redisStats()];
    for (const k of Object.keys(pg1)) pgSum[k] = (pgSum[k] ?? 0) + pg1[k] - pg0[k];
    for (const k of Object.keys(redis1)) redisSum[k] = (redisSum[k] ?? 0) + redis1[k] - (redis0[k] ?? 0);
  };
};
/** The issue's closed-loop rows, absolute and so out of reach on a machine slow enough (see outOfReach). */
const CLOSED_LOOP_TARGET = { rps: 2500, percentOfDirect: 30 };
const byName = await closedLoopsInTurns(
  {
    direct: { send: () => once(targets.direct, false), groups: cpuGroups },
    gateway: { send: () => once(targets.gateway, false), groups: cpuGroups },
    floor: { send: () => once(floorTarget, false), groups: floorGroups },
  },
  { connections: CONNECTIONS, seconds: SECONDS, rounds: ROUNDS, around: aroundTurn },
);
const [direct, through, floor] = ['direct', 'gateway', 'floor'].map((n) => ({ ...byName[n], latency: stats(byName[n].latencies) }));
const [cpuDirect, cpuThrough, cpuFloor] = [direct.cpu, through.cpu, floor.cpu];
console.log(`\n3. Sustained throughput, ${CONNECTIONS} connections, non-streaming (${ROUNDS} rounds: direct, gateway and floor take turns of ${(SECONDS / ROUNDS).toFixed(1)} s)`);
console.log(`   direct to upstream   ${direct.rps.toFixed(0)} req/s  p50 ${ms(direct.latency.p50)}  p99 ${ms(direct.latency.p99)}  errors ${direct.errors}`);
console.log(`   through the gateway  ${through.rps.toFixed(0)} req/s  p50 ${ms(through.latency.p50)}  p99 ${ms(through.latency.p99)}  errors ${through.errors}${through.lastError ? ` (${through.lastError})` : ''}   (target >= ${CLOSED_LOOP_TARGET.rps} req/s and >= ${CLOSED_LOOP_TARGET.percentOfDirect} % of direct, with auth and billing)`);
console.log(`   gateway / direct     ${((100 * through.rps) / direct.rps).toFixed(1)} %`);
// Everything shares the machine's cores, so a closed loop's rate is bounded by the CPU all processes spend per request.
console.log(`   CPU per request, direct:        ${cpuDirect.line}`);
console.log(`   CPU per request, through:       ${cpuThrough.line}`);
console.log(`   wake-ups per request, through:  ${cpuThrough.wakeupLine}`);
console.log(`   waiting for a CPU, through:     ${cpuThrough.runWaitLine}`);
storeLines(Object.fromEntries(Object.keys(pgSum).map((k) => [k, 0])), pgSum, {}, redisSum, through.ok);
summary.cpu = { direct: Object.fromEntries(cpuDirect.parts), gateway: Object.fromEntries(cpuThrough.parts) };
const floorPercentOfDirect = (100 * floor.rps) / direct.rps;
console.log(`   the floor (bench:floor's skeleton: same hops and ledger, nothing else)  ${floor.rps.toFixed(0)} req/s = ${floorPercentOfDirect.toFixed(1)} % of direct; errors ${floor.errors}`);
console.log(`   gateway / floor      ${((100 * through.rps) / floor.rps).toFixed(1)} %   (target >= 80 %: what atelier's own work costs on the same hops; docs/benchmarks.md, "floor")`);
console.log(`   CPU per request, floor:         ${cpuFloor.line}`);
console.log(`   reads/writes per request (system calls), through: ${cpuThrough.syscallLine}`);
console.log(`   reads/writes per request (system calls), floor:   ${cpuFloor.syscallLine}`);
console.log(stealLine([['direct turns', direct.steal], ['gateway turns', through.steal], ['floor turns', floor.steal]]));
// The closed-loop rows are absolute (req/s, share of direct), so a slow or busy machine can put them
// out of reach of the bare topology itself; say so rather than leave the miss to be read as atelier's.
const outOfReach = [
  floor.rps < CLOSED_LOOP_TARGET.rps && `${CLOSED_LOOP_TARGET.rps} req/s (the floor ${floor.rps.toFixed(0)})`,
  floorPercentOfDirect < CLOSED_LOOP_TARGET.percentOfDirect && `${CLOSED_LOOP_TARGET.percentOfDirect} % of direct (the floor ${floorPercentOfDirect.toFixed(1)} %)`,
].filter(Boolean);
if (outOfReach.length > 0) {
  console.log(`   out of reach on this machine this run: ${outOfReach.join(' and ')}; no gateway of this design can meet what its floor does not, so gateway / floor is the row to read`);
}

// Billing was on: each answered request cost 10 prompt + 5 completion tokens = 0.00002 credits.
const { ledger, settledIn } = await ledgerSettled();
const ledgerComplete = ledger.open === 0 && ledger.usage === ledger.closed;
const after = (await pool.query(`SELECT credits::text, reserved::text FROM namespaces WHERE name = 'bench'`)).rows[0];
const charged = Number(before) - Number(after.credits);
console.log(
  `   billing check: ${through.ok} answered in phase 3, charged ${charged.toFixed(6)} credits (expected ${(through.ok * 0.00002).toFixed(6)}), ` +
    `reserved now ${after.reserved}; over the whole run ${ledger.settled} settled reservations, ${ledger.closed - ledger.settled} released, ` +
    `${ledger.open} open, ${ledger.usage} usage rows (${!ledgerComplete ? 'INCOMPLETE after 5 s' : settledIn < 100 ? 'all there at once' : `all there after ${(settledIn / 1000).toFixed(1)} s`})`,
);
breakdown(scraped, scrapedAfter);
if (PERF_PHASE === '3') reportPerf();
// What any authenticated request costs the gateway (Fastify, Nest, the guard, the access log and
// metrics), with nothing of chat's: a GET of one model over the same connections. The gateway's
// CPU per chat request minus this is what the chat path itself costs it.
const modelUrl = new URL(`${gatewayUrl}/api/ai/models/bench-remote`);
const getModel = () =>
  new Promise((resolve, reject) => {
    const req = http.request(modelUrl, { agent, headers: { authorization: `Bearer ${user.api_key}` } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end();
  });
const [gets, cpuGet] = await withCpu(() => loop(getModel, CONNECTIONS, SECONDS));
const gatewayCpu = (cpu) => cpu.parts.find(([k]) => k === 'gateway')[1];
console.log(
  `   an authenticated GET of a model, same connections: ${gets.rps.toFixed(0)} req/s (errors ${gets.errors}), gateway CPU ${gatewayCpu(cpuGet).toFixed(3)} ms per request` +
    ` (the chat path's own share of the gateway's ${gatewayCpu(cpuThrough).toFixed(3)}: ${(gatewayCpu(cpuThrough) - gatewayCpu(cpuGet)).toFixed(3)})`,
);
const billingOk = Math.abs(charged - through.ok * 0.00002) < 1e-9 && Number(after.reserved) === 0 && ledgerComplete;
summary.throughput = {
  connections: CONNECTIONS,
  direct: direct.rps,
  gateway: through.rps,
  floor: floor.rps,
  gatewayCpuPerRequest: gatewayCpu(cpuThrough),
  gatewayCpuPerAuthenticatedGet: gatewayCpu(cpuGet),
  floorGatewayCpuPerRequest: gatewayCpu(cpuFloor),
  percentOfDirect: (100 * through.rps) / direct.rps,
  floorPercentOfDirect,
  percentOfFloor: (100 * through.rps) / floor.rps,
  stealPercent: { direct: direct.steal, gateway: through.steal, floor: floor.steal },
  errors: through.errors,
  billingOk,
};
if (!billingOk) {
  console.error('   BILLING MISMATCH');
  process.exitCode = 1;
}
}

// 4. Pathological input (issue 11): one 1 MiB message that is a single unbroken run used to make
// the gateway's token count quadratic (minutes of a blocked event loop). Measured beside 1 MiB of
// prose, with a probe request sent while each is being handled.
if (PHASES.includes('4')) {
  const prose = 'The quick brown fox jumps over the lazy dog, and the dog does not mind at all. '.repeat(14_000).slice(0, 1 << 20);
  // Every line ends in a quote, so no space or line break after a letter offers a cut (a second of counting before token-count's BOUNDARY).
  const quotedCsv = Array.from({ length: 480_000 }, (_, i) => `"${i}","item-${i}","${(i * 1.37).toFixed(2)}"\n`).join('').slice(0, 10 << 20);
  const probeOnce = async () => {
    const t = performance.now();
    await (await fetch(`${gatewayUrl}/api/ai/models/bench-remote`, { headers: { authorization: `Bearer ${user.api_key}` } })).arrayBuffer();
    return performance.now() - t;
  };
  const alone = [];
  for (let i = 0; i < 20; i++) alone.push(await probeOnce());
  const idle = stats(alone);
  console.log(`\n4. Pathological input: 1 MiB chat messages, and one of 10 MiB (the bench model's context is 8,192 tokens, so each is refused with 400 after counting)`);
  console.log(`   probe alone          p50 ${ms(idle.p50)}`);
  for (const [name, content] of [['prose', prose], ['one run of "A"', 'A'.repeat(1 << 20)], ['one run of CJK', '中'.repeat(1 << 20)], ['one run of spaces', ' '.repeat(1 << 20)], ['10 MiB run of "A"', 'A'.repeat(10 << 20)], ['10 MiB quoted CSV', quotedCsv]]) {
    const started = performance.now();
    const answer = fetch(`${gatewayUrl}/api/ai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${user.api_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'bench-remote', messages: [{ role: 'user', content }] }),
    }).then(async (r) => ({ status: r.status, ms: (await r.arrayBuffer(), performance.now() - started) }));
    const probe = await probeOnce();
    const { status, ms: took } = await answer;
    console.log(`   ${name.padEnd(20)} answered ${status} in ${ms(took)}; probe sent meanwhile ${ms(probe)}`);
    // Anything but the context-window 400 is a bug (a 10 MiB run was once a 500).
    if (status !== 400) {
      console.error(`   EXPECTED 400 for ${name}`);
      process.exitCode = 1;
    }
  }
}
// 5. After idle: what a caller who sends a request every few seconds (a developer at a prompt, a
// cron job) pays on each one. After IDLE_MS with no traffic, whatever expires with time has: the
// key's cached reading (AUTH_CACHE_MS, 1 s), the namespace's spare-credit reading that lets the
// reservation run beside the hand-off, pooled upstream connections (the fake upstream, like
// Node's http server, closes idle ones after 5 s), and warm caches. Each gateway request is sent
// right after a direct one, so both find the upstream's side equally idle.
if (PHASES.includes('5')) {
  const IDLE_MS = Number(process.env.BENCH_IDLE_MS ?? 6000);
  const count = Number(process.env.BENCH_IDLE_COUNT ?? 6);
  const direct = [];
  const through = [];
  const before = await scrapeAll();
  for (let i = 0; i < count; i++) {
    await new Promise((r) => setTimeout(r, IDLE_MS));
    direct.push((await once(targets.direct, false))[1]);
    through.push((await once(targets.gateway, false))[1]);
  }
  const after = await scrapeAll();
  const [d, g] = [stats(direct), stats(through)];
  console.log(`\n5. After ${(IDLE_MS / 1000).toFixed(0)} s idle, one request at a time (${count} each)`);
  console.log(`   direct p50 ${ms(d.p50)} max ${ms(d.max)}   gateway p50 ${ms(g.p50)} max ${ms(g.max)}   added p50 ${ms(g.p50 - d.p50)}`);
  summary.afterIdle = { idleMs: IDLE_MS, direct: d.p50, gateway: g.p50, addedP50: g.p50 - d.p50 };
  breakdown(before, after);
}

// 6. Instructions per request (callgrind.mjs): what the gateway and the chat service execute per
// request beside what the floor's two processes execute for the same requests. A count, not a time:
// nearly the same on every machine for the same build, so a change of a few per cent shows, where the timed
// phases' spread hides it. One request at a time (no batching to vary with timing), in windows of
// BENCH_COUNT_REQUESTS (default 200), BENCH_COUNT_WINDOWS of them (default 40) on each path. Each
// window's count is split (dumpParts): V8's optimizing compilers and its garbage collector swing a
// window's count by a quarter or more (a major collection lands in one window in ten). The requests'
// own work is what is compared, and it is the median of the last three windows after the same number
// of requests on every run, not after a settling test: it goes on shrinking while V8 optimizes (the
// gateway's from 1,570k instructions per request in the first window to 655k in the 40th and 635k in
// the 60th), slower and slower, so only the same schedule compares like with like. At the 40th
// window three runs gave the gateway 655k, 656k (two side by side, window for window within a few
// per cent) and 706k, and the floor's gateway 523k and 524k: runs differ by up to 8 %, far less than
// timed runs, so compare the gateway with the floor of the same run. BENCH_COUNT_TOP=<n> also names
// the gateway's and chat service's n hottest functions, JavaScript included: that starts them with
// --perf-basic-prof, whose map names V8's code (690k and 684k with it, within the spread above; off
// by default so the figures are taken with the services' own flags). BENCH_KEEP_DUMPS=<dir> keeps each
// window's dump there (callgrind.<pid>.out.<window>; with KEEP_MAPS=1 the perf maps that name its JavaScript stay too).
if (COUNTING) {
  const WINDOW = Number(process.env.BENCH_COUNT_REQUESTS ?? 200);
  const WINDOWS = Number(process.env.BENCH_COUNT_WINDOWS ?? 40);
  const KEEP_DUMPS = process.env.BENCH_KEEP_DUMPS;
  if (KEEP_DUMPS) fs.mkdirSync(KEEP_DUMPS, { recursive: true });
  if (!(WINDOWS >= 3)) throw new Error('BENCH_COUNT_WINDOWS: at least 3');
  const floor = await theFloor();
  const paths = [
    ['through the gateway', targets.gateway, { gateway: pidsOf.gateway, chat: pidsOf.chat }],
    ['the floor', floor.target, { gateway: floor.skeleton.pids.gateway, chat: floor.skeleton.pids.worker }],
  ];
  const k = (n) => `${(n / 1000).toFixed(0)}k`;
  const perRequest = ({ functions, ...parts }) => ({ ...Object.fromEntries(Object.entries(parts).map(([part, n]) => [part, n / WINDOW])), functions });
  console.log(`\n6. Instructions per request (callgrind; one request at a time, ${WINDOWS} windows of ${WINDOW}; the floor's gateway and worker stand beside the gateway and chat service)`);
  const counts = {};
  for (const [name, target, groups] of paths) {
    countFrom(Object.values(groups).flat());
    const windows = [];
    while (windows.length < WINDOWS) {
      const began = performance.now();
      const [, count] = await instructionsDuring(callgrindDir, groups, () => sequential(target, false, WINDOW), KEEP_DUMPS);
      const now = Object.fromEntries(Object.entries(count).map(([group, parts]) => [group, perRequest(parts)]));
      windows.push(now);
      // A window takes several seconds under callgrind: say each one as it ends.
      const shown = (group) => `${group} ${k(now[group].requests)} (+ compilers ${k(now[group].compile)}, GC ${k(now[group].gc)})`;
      console.log(`     ${name}, window ${windows.length}: ${Object.keys(groups).map(shown).join(', ')}  ${((performance.now() - began) / 1000).toFixed(0)} s`);
    }
    const three = windows.slice(-3);
    counts[name] = Object.fromEntries(
      Object.keys(groups).map((group) => {
        const of = (part) => three.map((w) => w[group][part]);
        return [group, { requests: of('requests').sort((a, b) => a - b)[1], compile: of('compile').reduce((a, b) => a + b) / 3, gc: of('gc').reduce((a, b) => a + b) / 3 }];
      }),
    );
    const line = (group) => `${group} ${k(counts[name][group].requests)} (${three.map((w) => k(w[group].requests)).join(' / ')}; compilers ${k(counts[name][group].compile)}, GC ${k(counts[name][group].gc)})`;
    console.log(`   ${name.padEnd(20)} ${Object.keys(groups).map(line).join('   ')}   (the last three windows)`);
    if (name !== 'through the gateway' || !COUNT_TOP) continue;
    // Where atelier's processes spend the requests' own work, over the same three windows: each
    // function's own instructions, a JavaScript function's tiers (its perf map name's first character) added together.
    for (const group of Object.keys(groups)) {
      const byName = new Map();
      for (const w of three) {
        for (const [fn, n] of w[group].functions) {
          if (partOf(fn) !== 'requests') continue;
          const js = fn.replace(/^JS:[~^+*']/, 'JS:');
          byName.set(js, (byName.get(js) ?? 0) + n / WINDOW / 3);
        }
      }
      const top = [...byName].sort((a, b) => b[1] - a[1]).slice(0, COUNT_TOP);
      console.log(`     the ${group}'s top ${COUNT_TOP} functions in the requests' own work (own instructions per request): ${top.map(([fn, n]) => `${fn.replace(/ \/.*\//, ' ').slice(0, 90)} ${k(n)}`).join(';  ')}`);
    }
  }
  if (COUNT_TOP) removePerfMaps();
  const [g, f] = [counts['through the gateway'], counts['the floor']];
  const beside = (group) => `${k(g[group].requests - f[group].requests)} more (${((g[group].requests / f[group].requests) * 100).toFixed(0)} % of the floor's)`;
  console.log(`   the requests' own work: the gateway over the floor's gateway ${beside('gateway')};  the chat service over the floor's worker ${beside('chat')}`);
  summary.instructions = { requestsPerWindow: WINDOW, windows: WINDOWS, gateway: g, floor: f };
}

if (pods.size) {
  console.log(`\nPod memory (each process in a cgroup of ${(POD_MEMORY / 2 ** 20).toFixed(0)} MiB)`);
  for (const [name, { pod, pid }] of pods) {
    const r = { ...pod.report(), peakRssBytes: peakRss(pid) };
    const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
    console.log(`   ${name}: cgroup peak ${mib(r.peakBytes)} (page cache included), process peak RSS ${mib(r.peakRssBytes)}; limit hit ${r.limitHits} times, OOM kills ${r.oomKills}`);
    (summary.podMemory ??= {})[name] = r;
  }
}

if (floorStarted) await (await floorStarted).skeleton.stop();
if (TRACING) {
  const { exports } = await (await fetch(`http://127.0.0.1:${sinkPort}/stats`)).json();
  const metricsText = await (await fetch(`${gatewayUrl}/metrics`, { headers: metricsHeaders })).text();
  const dropped = [...metricsText.matchAll(/atelier_trace_spans_dropped_total\{[^}]*reason="(\w+)"[^}]*\} (\d+)/g)].map(([, reason, n]) => `${reason} ${n}`).join(', ');
  console.log(`\ntracing: the sink took ${exports} exports; the gateway dropped: ${dropped || 'none'}`);
}
if (process.env.BENCH_JSON) fs.writeFileSync(process.env.BENCH_JSON, JSON.stringify({ bench: 'chat', machine: machine(), ...summary }, null, 2));
agent.destroy();
redis.disconnect();
await pool.end();
await cleanup();
// Written as the profiled processes exited (in cleanup).
if (PROFILED) {
  const [phase, windows] = profileWindows[3].length
    ? ["phase 3's gateway turns", profileWindows[3]]
    : profileWindows[1].length
      ? ["phase 1's gateway run", profileWindows[1]]
      : ['the whole run', []];
  for (const pid of pidsOf[PROFILED] ?? []) {
    const file = fs.readdirSync(profileDir).find((f) => f.endsWith('.cpuprofile') && f.split('.')[3] === String(pid));
    if (!file) {
      console.log(`\nno CPU profile of ${PROFILED} (pid ${pid}) in ${profileDir}`);
      continue;
    }
    console.log(`\nCPU profile of ${PROFILED} (pid ${pid}) over ${phase}: ${path.join('var/profiles', file)}`);
    console.log(formatCpuProfileSummary(summarizeCpuProfile(JSON.parse(fs.readFileSync(path.join(profileDir, file), 'utf8')), windows)).join('\n'));
    console.log(`   more lines: node tools/bench/cpu-profile-summary.mjs ${path.join('var/profiles', file)} ${windows.flat().join(' ')}`);
  }
}
