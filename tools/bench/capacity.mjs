#!/usr/bin/env node
// npm run bench:capacity — what one request of each route class costs the deployment: Redis
// commands, Postgres transactions and rows written, and CPU milliseconds in each service, in
// Postgres and in Redis. The figures docs/scaling.md sizes a deployment from.
//
// Every service runs as deployed (its own fresh process: gateway, chat, media, queue-worker,
// events), with a fake OpenAI-compatible upstream for chat (its own process, not counted as
// atelier's), on a fresh database and Redis prefix. Each class runs BENCH_CAPACITY_N requests
// (default 1000; 200 for images and the queue) with 8 in flight; around it:
//   - Redis: `INFO commandstats` (calls per command, server-wide, so run it alone on the machine);
//   - Postgres: `pg_stat_database` of the bench's database (commits, rows inserted/updated/deleted),
//     read after 11 s of quiet (a backend publishes its counts when idle 10 s);
//   - CPU: /proc/<pid>/stat of each service, of every postgres and redis-server process.
// What the services do while idle (BullMQ's blocking reads, sweeps, health) is measured first over
// the same quiet and taken off each class in proportion to its time.
// Last, memory per request in flight: BENCH_INFLIGHT (default 1024; the chat service holds its concurrency, 256, of them)
// chat completions held open by an upstream that answers after 20 s; the gateway's and the chat
// service's RSS (from /proc, the median of five readings) before and while they are held.
// BENCH_CAPACITY_ONLY=inflight runs that part alone.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import { Redis } from 'ioredis';
import pg from 'pg';
import { benchCatalog, benchDatabase, dist, benchRedisUrl, benchTempDir, BENCH_METRICS_TOKEN, buildAll, cpuSeconds, dieWithBench, freePort, machine, spawnUntilReady, startFakeUpstream } from './bench-env.mjs';

const N = Number(process.env.BENCH_CAPACITY_N ?? 1000);
const N_MEDIA = Math.max(20, Math.round(N / 5));
const IN_FLIGHT = 8;
const QUIET_MS = 11_000;
const API_KEY_ENV = 'BENCH_UPSTREAM_API_KEY';
const API_KEY = 'sk-bench-upstream-key';
const ADMIN_TOKEN = randomBytes(32).toString('hex');

buildAll();
const db = await benchDatabase();
const children = [];
const pidsOf = {};
const cleanup = async () => {
  for (const c of children) c.kill('SIGTERM');
  await Promise.all(children.map((c) => new Promise((r) => (c.exitCode !== null ? r() : c.once('exit', r)))));
  await db.drop().catch(() => undefined);
};
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => void cleanup().then(() => process.exit(130)));
process.on('exit', () => children.forEach((c) => c.kill('SIGKILL')));

function startNode(name, args, env, probe) {
  const { child, ready } = spawnUntilReady(name, process.execPath, [...dieWithBench, ...args], env, probe);
  children.push(child);
  (pidsOf[name] ??= []).push(child.pid);
  return ready;
}
const healthy = (port) => async () => (await fetch(`http://127.0.0.1:${port}/health`)).ok;

// ---- processes -------------------------------------------------------------------------------
const upstreamUrl = await startFakeUpstream(startNode, API_KEY);
const catalogDir = benchCatalog({ upstreamUrl, upstreamModel: 'fixed', apiKeyEnv: API_KEY_ENV, description: 'The fake upstream, through the openai-compatible provider' });
// The same model, answered after 20 s: requests held in flight for the memory reading.
const held = JSON.parse(fs.readFileSync(`${catalogDir}/bench-remote.json`, 'utf8'));
fs.writeFileSync(`${catalogDir}/bench-held.json`, JSON.stringify({ ...held, id: 'bench-held', engine: { ...held.engine, upstream_model: 'delay-20000' } }));
const ports = { gateway: await freePort(), chat: await freePort(), media: await freePort(), 'queue-worker': await freePort(), events: await freePort() };
const portVar = { gateway: 'PORT', chat: 'CHAT_PORT', media: 'MEDIA_PORT', 'queue-worker': 'QUEUE_WORKER_PORT', events: 'EVENTS_PORT' };
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
  STORAGE_DIR: benchTempDir('blobs'),
  [API_KEY_ENV]: API_KEY,
};
await Promise.all(
  Object.entries(ports).map(([name, port]) => startNode(name, [`dist/local/apps/${name}/src/main.js`], { ...serviceEnv, [portVar[name]]: String(port) }, healthy(port))),
);
const base = `http://127.0.0.1:${ports.gateway}`;
const user = await (
  await fetch(`${base}/api/admin/users`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ username: 'bench', credits: '1000000' }) })
).json();

// ---- counters --------------------------------------------------------------------------------
const redis = new Redis(benchRedisUrl);
const pgClient = new pg.Client({ connectionString: db.databaseUrl });
await pgClient.connect();
const groups = { gateway: pidsOf.gateway, chat: pidsOf.chat, media: pidsOf.media, 'queue-worker': pidsOf['queue-worker'], events: pidsOf.events, postgres: 'postgres', redis: 'redis-server' };
const SERVICES = Object.keys(groups);

async function commandStats() {
  const stats = new Map();
  for (const line of (await redis.info('commandstats')).split('\n')) {
    const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
    if (m) stats.set(m[1], Number(m[2]));
  }
  return stats;
}
async function pgStats() {
  const { rows } = await pgClient.query('SELECT xact_commit::bigint AS commits, (tup_inserted + tup_updated + tup_deleted)::bigint AS written, tup_inserted::bigint AS inserted FROM pg_stat_database WHERE datname = current_database()');
  return { commits: Number(rows[0].commits), written: Number(rows[0].written), inserted: Number(rows[0].inserted) };
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function snapshot() {
  return { at: performance.now(), redis: await commandStats(), pg: await pgStats(), cpu: cpuSeconds(groups) };
}
/** What changed between two snapshots: Redis calls by command, Postgres figures, CPU ms by group. */
function delta(a, b) {
  const calls = new Map();
  for (const [cmd, n] of b.redis) if (n - (a.redis.get(cmd) ?? 0) > 0) calls.set(cmd, n - (a.redis.get(cmd) ?? 0));
  // Our own readings are not the work measured: one INFO and one pg query a snapshot.
  calls.set('info', (calls.get('info') ?? 0) - 1);
  return {
    ms: b.at - a.at,
    calls,
    commits: b.pg.commits - a.pg.commits - 1,
    written: b.pg.written - a.pg.written,
    inserted: b.pg.inserted - a.pg.inserted,
    cpu: Object.fromEntries(SERVICES.map((k) => [k, (b.cpu[k].all - a.cpu[k].all) * 1000])),
  };
}

// ---- load ------------------------------------------------------------------------------------
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
function request(method, route, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${route}`, { method, agent, headers: { authorization: `Bearer ${user.api_key}`, 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => (res.statusCode >= 400 ? reject(new Error(`${method} ${route}: ${res.statusCode} ${text.slice(0, 300)}`)) : resolve(text)));
    });
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}
async function inFlight(n, one) {
  let next = 0;
  await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
    while (next < n) await one(next++);
  }));
}
const chatBody = { model: 'bench-remote', messages: [{ role: 'user', content: 'Say hello in one short sentence.' }] };
const CLASSES = [
  { name: 'chat completion', n: N, one: () => request('POST', '/api/ai/chat/completions', chatBody) },
  { name: 'streamed chat completion', n: N, one: () => request('POST', '/api/ai/chat/completions', { ...chatBody, stream: true }) },
  { name: 'chat completion, store: true', n: N, one: () => request('POST', '/api/ai/chat/completions', { ...chatBody, store: true }) },
  { name: 'Responses (stored, the default)', n: N, one: () => request('POST', '/api/ai/responses', { model: 'bench-remote', input: 'Say hello in one short sentence.' }) },
  { name: 'image, synchronous (128 px)', n: N_MEDIA, one: (i) => request('POST', '/api/ai/images/generate', { model: 'local-image', prompt: `a lighthouse ${i}`, width: 128, height: 128 }) },
  {
    name: 'queue enqueue + run + event (128 px image)',
    n: N_MEDIA,
    // Enqueued with an event stream open; done when every completion event arrived.
    run: async (n) => {
      const seen = new Set();
      const ac = new AbortController();
      const res = await fetch(`${base}/api/events`, { headers: { authorization: `Bearer ${user.api_key}` }, signal: ac.signal });
      let all;
      const done = new Promise((r) => (all = r));
      void (async () => {
        const decoder = new TextDecoder();
        let text = '';
        for await (const chunk of res.body) {
          text += decoder.decode(chunk, { stream: true });
          const frames = text.split('\n\n');
          text = frames.pop();
          for (const frame of frames) {
            if (!frame.includes('event: media_generation_completed')) continue;
            const data = /^data: (.*)$/m.exec(frame)?.[1];
            if (data) seen.add(JSON.parse(data).generation_id);
          }
          if (seen.size >= n) all();
        }
      })().catch(() => undefined);
      await inFlight(n, (i) => request('POST', '/api/ai/queue', { model: 'local-image', prompt: `a harbour ${i}`, width: 128, height: 128 }));
      await Promise.race([done, sleep(120_000)]);
      ac.abort();
      if (seen.size < n) throw new Error(`only ${seen.size} of ${n} completion events arrived`);
    },
  },
];

console.log(`atelier capacity benchmark — ${machine()}; every service its own process; ${IN_FLIGHT} requests in flight`);
await sleep(QUIET_MS);
const q0 = await snapshot();
await sleep(QUIET_MS);
const idle = delta(q0, await snapshot());
const idleRate = { calls: [...idle.calls.values()].reduce((a, b) => a + b, 0) / idle.ms, commits: idle.commits / idle.ms, cpu: Object.fromEntries(SERVICES.map((k) => [k, idle.cpu[k] / idle.ms])) };
console.log(`idle, per second: ${(idleRate.calls * 1000).toFixed(1)} Redis commands, ${(idleRate.commits * 1000).toFixed(2)} Postgres commits, CPU ms ${SERVICES.map((k) => `${k} ${(idleRate.cpu[k] * 1000).toFixed(1)}`).join(' ')}`);

const results = [];
const ONLY_INFLIGHT = process.env.BENCH_CAPACITY_ONLY === 'inflight';
for (const cls of ONLY_INFLIGHT ? [] : CLASSES) {
  // Warm: the first requests of a class compile code paths and open connections.
  if (cls.run) await cls.run(10);
  else await inFlight(20, cls.one);
  await sleep(QUIET_MS);
  const before = await snapshot();
  const started = performance.now();
  if (cls.run) await cls.run(cls.n);
  else await inFlight(cls.n, cls.one);
  const loadMs = performance.now() - started;
  await sleep(QUIET_MS);
  const d = delta(before, await snapshot());
  const per = (x) => x / cls.n;
  const calls = [...d.calls.values()].reduce((a, b) => a + b, 0) - idleRate.calls * d.ms;
  const row = {
    name: cls.name,
    n: cls.n,
    rate: (cls.n / loadMs) * 1000,
    redis: per(calls),
    top: [...d.calls.entries()].filter(([c]) => c !== 'info').sort((a, b) => b[1] - a[1]).slice(0, 6).map(([c, v]) => `${c} ${per(v).toFixed(1)}`),
    commits: per(d.commits - idleRate.commits * d.ms),
    written: per(d.written),
    inserted: per(d.inserted),
    cpu: Object.fromEntries(SERVICES.map((k) => [k, per(d.cpu[k] - idleRate.cpu[k] * d.ms)])),
  };
  results.push(row);
  console.log(`\n${row.name}: ${row.n} requests at ${row.rate.toFixed(0)}/s with ${IN_FLIGHT} in flight`);
  console.log(`   Redis ${row.redis.toFixed(1)} commands per request (${row.top.join(', ')})`);
  console.log(`   Postgres ${row.commits.toFixed(2)} commits, ${row.written.toFixed(2)} rows written (${row.inserted.toFixed(2)} inserted) per request`);
  console.log(`   CPU ms per request: ${SERVICES.map((k) => `${k} ${Math.max(0, row.cpu[k]).toFixed(3)}`).join('  ')}`);
}

console.log('\n| Route class | Redis commands | Postgres commits | Rows written | ' + SERVICES.map((k) => `${k} CPU ms`).join(' | ') + ' |');
console.log('|---|---|---|---|' + SERVICES.map(() => '---').join('|') + '|');
for (const r of results) console.log(`| ${r.name} | ${r.redis.toFixed(1)} | ${r.commits.toFixed(2)} | ${r.written.toFixed(2)} | ${SERVICES.map((k) => Math.max(0, r.cpu[k]).toFixed(3)).join(' | ')} |`);

// ---- memory per request in flight -------------------------------------------------------------
const INFLIGHT = Number(process.env.BENCH_INFLIGHT ?? 1024);
const rss = (pid) => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) * 1024;
async function rssNow() {
  const readings = { gateway: [], chat: [] };
  for (let i = 0; i < 5; i++) {
    for (const k of Object.keys(readings)) readings[k].push(rss(pidsOf[k][0]));
    await sleep(200);
  }
  return Object.fromEntries(Object.entries(readings).map(([k, v]) => [k, v.sort((a, b) => a - b)[2]]));
}
// Warm: the held model's first requests open connections and compile its paths.
await Promise.all(Array.from({ length: 8 }, () => request('POST', '/api/ai/chat/completions', { ...chatBody, model: 'bench-remote' })));
await sleep(2000);
const idleRss = await rssNow();
const heldAgent = new http.Agent({ keepAlive: true, maxSockets: INFLIGHT });
const heldRequests = Array.from({ length: INFLIGHT }, () =>
  new Promise((resolve, reject) => {
    const req = http.request(`${base}/api/ai/chat/completions`, { method: 'POST', agent: heldAgent, headers: { authorization: `Bearer ${user.api_key}`, 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`held request: ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(JSON.stringify({ ...chatBody, model: 'bench-held' }));
  }),
);
// Every request has reached the upstream well before this (they wait there 20 s).
await sleep(6000);
const heldRss = await rssNow();
// The chat service runs at most its concurrency at once; the rest wait in the Redis stream.
const heldBy = { gateway: INFLIGHT, chat: Math.min(INFLIGHT, dist('libs/contracts/src/index.js').CHAT_COMPLETION_QUEUE.settings.concurrency) };
const inflight = Object.fromEntries(Object.keys(idleRss).map((k) => [k, (heldRss[k] - idleRss[k]) / heldBy[k]]));
console.log(
  `\nmemory per request in flight (${INFLIGHT} chat completions held by the upstream): ${Object.entries(inflight).map(([k, v]) => `${k} ${(v / 1024).toFixed(1)} KB over ${heldBy[k]} (RSS ${(idleRss[k] / 2 ** 20).toFixed(0)} -> ${(heldRss[k] / 2 ** 20).toFixed(0)} MB)`).join(', ')}`,
);
await Promise.all(heldRequests);
heldAgent.destroy();

if (process.env.BENCH_CAPACITY_JSON) fs.writeFileSync(process.env.BENCH_CAPACITY_JSON, JSON.stringify({ machine: machine(), idle: idleRate, results, inflight }, null, 2));

await redis.quit();
await pgClient.end();
agent.destroy();
await cleanup();
