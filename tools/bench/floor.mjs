#!/usr/bin/env node
// npm run bench:floor — what the chat path's hops cost with nothing else on them.
//
// bench:chat compares the gateway with a client calling the upstream directly: two processes
// against six (client, gateway, chat service, upstream, Redis, Postgres) on the same two cores. This
// bench builds the same topology from the same libraries with none of atelier's work on it, to
// say how much of the gap is the topology itself:
//   - a skeleton gateway: node:http, JSON.parse of the body, the call added to a Redis stream
//     (ioredis, auto-pipelined), the reply awaited on one pattern subscription, the answer sent;
//   - a skeleton chat worker: XREADGROUP, the upstream called with undici, the reply published
//     and the entry acknowledged and deleted in one script call;
//   - with FLOOR_PG (default on; 'both' runs both): atelier's own credit ledger
//     (BatchedCreditLedger: group-committed statements on Postgres): a reservation taken beside
//     the hand-off, settled after the answer with the request's record, as the gateway does;
//   - the same fake upstream and closed-loop client as bench:chat phase 3;
//   - V8's old-generation headroom in both skeleton processes set as the services set it
//     (V8_HEAP_GROWING_PERCENT), so the garbage collector does the same work on both sides.
// bench:media starts the same skeleton on the synchronous image hop (startSkeleton with a storage
// folder: the worker stores a ready-made PNG through atelier's blob store instead of calling an upstream).
// No auth, validation, token counting, metrics, governance, Nest or Fastify. The closed loop's
// rate through it, as a share of the direct rate in the same run, is the ceiling for
// bench:chat's "share of the direct rate" on this machine; CPU per request says where it goes.
// The direct path and the skeleton take turns (BENCH_LOOP_ROUNDS rounds, default 3; closedLoopsInTurns).
// Env: BENCH_SECONDS (default 10), BENCH_CONNECTIONS (default 64), FLOOR_PG (1, 0 or both), BENCH_LOOP_ROUNDS.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { applyServiceHeapGrowth, benchDatabase, benchRedisUrl, buildAll, closedLoop, closedLoopsInTurns, dieWithBench, dist, freePort, machine, require, serviceFlags } from './bench-env.mjs';
import { root } from '../bootstrap.mjs';

const Redis = require('ioredis');
/** The user the skeleton's request records name (credit_reservations.user_id has no foreign key). */
const FLOOR_USER = '00000000-0000-4000-8000-00000000f100';
/** 'gateway' or 'worker' when started as a skeleton process, 'main' when run as bench:floor; imported, none. */
const role = process.argv[1] === fileURLToPath(import.meta.url) ? (process.argv[2] ?? 'main') : undefined;

/** atelier's group commit (calls made while one is in flight go together in the next), as the RPC client and worker use it. */
function groupCommit(run, maxBatch = 64) {
  const { GroupCommit } = dist('libs/runtime/src/group-commit.js');
  const commit = new GroupCommit(run, { maxBatch });
  return (item) => commit.submit(item);
}

/** Resolves once a child started with an IPC channel says it is ready; rejects if it exits first. */
const ready = (child) =>
  new Promise((resolve, reject) => {
    child.once('message', resolve);
    child.once('exit', (code) => reject(new Error(`a floor process exited with ${code}`)));
  });

/**
 * Starts the skeleton (gateway and worker processes) in front of `upstreamUrl` (the chat
 * completions URL), or, given `storageDir` instead, the synchronous image path's: a worker that
 * stores an image the engine would have made in atelier's local blob store under that folder and
 * replies with its key, and a gateway that answers with a signed URL to it (the engine's own
 * time is what bench:media takes off atelier's figure, so the floor runs none). Given
 * `databaseUrl`, with atelier's ledger, on a namespace of the skeleton's own made there (so a
 * bench's own checks of its user's credits never count the floor's). Every answer carries a
 * `server-timing` total, from the request's headers read to the answer written, as atelier's does.
 * `wrap(command, argv)` gives what starts each of its processes instead (bench:chat's phase 6: under
 * callgrind). Resolves with its URL, its pids and a stop function.
 */
export async function startSkeleton({ port, prefix, upstreamUrl = '', upstreamKey = '', storageDir = '', databaseUrl = '', wrap = (command, argv) => [command, argv] }) {
  const self = fileURLToPath(import.meta.url);
  let namespaceId = '';
  if (databaseUrl) {
    const admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    const made = await admin.query(`INSERT INTO namespaces (id, name, type, credits) VALUES (gen_random_uuid(), $1, 'org', 1000000) RETURNING id::text`, [`floor-${randomUUID().slice(0, 8)}`]);
    namespaceId = made.rows[0].id;
    await admin.end();
  }
  // BENCH_SERVICE_FLAGS reach the skeleton's processes too, so a V8 setting or trace compares like with like.
  const flags = serviceFlags();
  const start = (args, env = {}) => spawn(...wrap(process.execPath, [...dieWithBench, ...flags, self, ...args]), { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const work = storageDir ? 'image' : 'chat';
  const gateway = start(['gateway', String(port), prefix, databaseUrl, namespaceId, work]);
  const worker = storageDir ? start(['image-worker', prefix, storageDir]) : start(['worker', prefix, upstreamUrl], { FLOOR_UPSTREAM_KEY: upstreamKey });
  const kill = () => [gateway, worker].forEach((c) => c.kill('SIGKILL'));
  process.once('exit', kill);
  await Promise.all([ready(gateway), ready(worker)]);
  return {
    url: `http://127.0.0.1:${port}/`,
    pids: { gateway: [gateway.pid], worker: [worker.pid] },
    stop: async () => {
      process.off('exit', kill);
      kill();
      const r = new Redis(benchRedisUrl);
      await r.del(`${prefix}:calls`);
      await r.quit();
    },
  };
}

// ---- skeleton gateway --------------------------------------------------------------------------
if (role === 'gateway') {
  const [, , , port, prefix, databaseUrl, namespaceId, work] = process.argv;
  applyServiceHeapGrowth();
  // What differs between the two paths the skeleton stands for: what is reserved, how the
  // worker's reply becomes the answer, and what the settle records.
  const image = work === 'image';
  const { SignedUrls } = dist('libs/storage/src/index.js');
  const urls = new SignedUrls('floor-signing-secret', `http://127.0.0.1:${port}`, 3600);
  const kind = image
    ? { amount: '0.010000', charge: '0.010000', tags: { model: 'bench-image', endpoint: '/api/ai/images/generate' }, answer: (reply) => ({ created: Math.floor(Date.now() / 1000), data: [{ url: urls.url(reply.key) }] }), usage: () => ({ images: 1 }) }
    : { amount: '0.000272', charge: '0.00002', tags: { model: 'bench-remote', endpoint: '/api/ai/chat/completions' }, answer: (reply) => reply.completion, usage: (reply) => ({ inputTokens: reply.usage.prompt_tokens, outputTokens: reply.usage.completion_tokens }) };
  const redis = new Redis(benchRedisUrl, { enableAutoPipelining: true });
  const sub = new Redis(benchRedisUrl);
  const instance = randomUUID().slice(0, 8);
  const pending = new Map();
  sub.on('pmessage', (_p, channel, raw) => {
    const done = pending.get(channel);
    if (done) {
      pending.delete(channel);
      done(raw);
    }
  });
  await sub.psubscribe(`${prefix}:reply:${instance}-*`);
  const stream = `${prefix}:calls`;
  const addCall = groupCommit((calls) => {
    const p = redis.pipeline();
    for (const c of calls) p.xadd(stream, 'MAXLEN', '~', 100000, '*', 'job', c.jobId, 'data', c.data);
    return p.exec().then((r) => r.map(([, id]) => id));
  });
  let ledger;
  if (databaseUrl) {
    // atelier's own ledger (group commit, the statements the gateway runs): the billing work
    // is part of the path's floor, only what surrounds it is left out.
    const { createPrismaClient } = dist('libs/db/src/index.js');
    const { CreditLedger, BatchedCreditLedger } = dist('libs/billing/src/index.js');
    ledger = new BatchedCreditLedger(new CreditLedger(createPrismaClient(databaseUrl, 4)), { DATABASE_URL: databaseUrl });
  }
  http
    .createServer((req, res) => {
      const received = performance.now();
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (d) => (body += d));
      req.on('end', async () => {
        try {
          const parsed = JSON.parse(body);
          const jobId = `${instance}-${randomUUID()}`;
          // The reservation is taken beside the hand-off, as atelier's gateway does when the
          // namespace's credits cover it many times over; the answer waits for both.
          const started = performance.now();
          const reserving = ledger?.reserve(namespaceId, kind.amount, `floor:${jobId}`, kind.tags);
          const answer = new Promise((resolve) => pending.set(`${prefix}:reply:${jobId}`, resolve));
          await addCall({ jobId, data: JSON.stringify({ model: parsed.model, body: parsed }) });
          const [reservation, raw] = await Promise.all([reserving, answer]);
          const reply = JSON.parse(raw);
          const out = JSON.stringify(kind.answer(reply));
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out), 'server-timing': `total;dur=${(performance.now() - received).toFixed(2)}` });
          res.end(out);
          // With the request's record, as atelier's settle writes it on the reservation.
          const request = { outcome: 'succeeded', userId: FLOOR_USER, provider: 'upstream', stream: false, requestId: jobId, errorMessage: null, durationMs: performance.now() - started };
          if (ledger) await ledger.settle(reservation, kind.charge, { ...kind.usage(reply), request });
        } catch (err) {
          res.writeHead(500);
          res.end(String(err));
        }
      });
    })
    .listen(Number(port), '127.0.0.1', () => process.send?.('ready'));
}

// ---- skeleton workers -----------------------------------------------------------------------------
/** The chat worker's work: the upstream called with undici, its completion and usage the reply. */
function chatWork(upstream) {
  const { Pool } = require('undici');
  const upstreamUrl = new URL(upstream);
  const agent = new Pool(upstreamUrl.origin, { connections: 128 });
  return async (call) => {
    const res = await agent.request({
      method: 'POST',
      path: upstreamUrl.pathname,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${process.env.FLOOR_UPSTREAM_KEY}` },
      body: JSON.stringify({ ...call.body, model: 'fixed' }),
    });
    const completion = await res.body.json();
    return { completion, usage: completion.usage };
  };
}

/**
 * The image worker's work without the engine: a 64x64 PNG (made once, by sharp, as the engine
 * makes it) written through atelier's local blob store under a key made as the media service
 * makes its outputs' (outputKey), its key the reply.
 */
async function imageWork(storageDir) {
  const { LocalBlobStore, outputKey } = dist('libs/storage/src/index.js');
  const store = new LocalBlobStore(storageDir);
  const png = await require('sharp')({ create: { width: 64, height: 64, channels: 3, background: { r: 40, g: 90, b: 160 } } }).png().toBuffer();
  return async () => {
    const key = outputKey({ namespace: 'floor' }, `${randomUUID()}.png`);
    await store.put(key, png, 'image/png');
    return { key };
  };
}

if (role === 'worker' || role === 'image-worker') {
  const [, , , prefix, target] = process.argv;
  applyServiceHeapGrowth();
  const work = role === 'worker' ? chatWork(target) : await imageWork(target);
  const redis = new Redis(benchRedisUrl);
  const blocking = new Redis(benchRedisUrl);
  const stream = `${prefix}:calls`;
  await redis.xgroup('CREATE', stream, 'g', '$', 'MKSTREAM').catch(() => undefined);
  redis.defineCommand('reply', {
    numberOfKeys: 1,
    lua: `for i = 1, #ARGV, 3 do
            redis.call('PUBLISH', ARGV[i], ARGV[i + 1])
            redis.call('XACK', KEYS[1], 'g', ARGV[i + 2])
            redis.call('XDEL', KEYS[1], ARGV[i + 2])
          end`,
  });
  const reply = groupCommit(async (replies) => {
    await redis.reply(stream, ...replies.flat());
    return replies.map(() => undefined);
  });
  let running = 0;
  const run = async (entryId, fields) => {
    running++;
    try {
      const result = await work(JSON.parse(fields[3]));
      await reply([`${prefix}:reply:${fields[1]}`, JSON.stringify(result), entryId]);
    } finally {
      running--;
    }
  };
  process.send?.('ready');
  for (;;) {
    const read = await blocking.xreadgroup('GROUP', 'g', 'w', 'COUNT', 64, 'BLOCK', 2000, 'STREAMS', stream, '>');
    for (const [, entries] of read ?? []) for (const [id, fields] of entries) void run(id, fields);
    // At most 256 calls in flight, as atelier's consumer bounds its own.
    while (running >= 256) await new Promise((r) => setImmediate(r));
  }
}

// ---- the run ---------------------------------------------------------------------------------------
if (role === 'main') {
  const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
  const ROUNDS = Number(process.env.BENCH_LOOP_ROUNDS ?? 3);
  const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
  const variants = { 1: [true], 0: [false], both: [false, true] }[process.env.FLOOR_PG ?? '1'];
  const API_KEY = 'sk-floor-upstream-key';
  buildAll();
  const db = await benchDatabase();
  const children = [];
  process.on('exit', () => children.forEach((c) => c.kill('SIGKILL')));
  const start = (args, env = {}) => {
    const child = spawn(process.execPath, [...dieWithBench, ...args], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    children.push(child);
    return child;
  };

  const upstreamPort = await freePort();
  const upstream = start(['-e', `require(${JSON.stringify(path.join(root, 'libs/testing/src/fake-openai-upstream.ts'))}).startFakeOpenAiUpstream({ apiKey: ${JSON.stringify(API_KEY)}, port: ${upstreamPort}, record: false }).then(() => process.send('ready'))`]);
  await ready(upstream);
  const upstreamUrl = `http://127.0.0.1:${upstreamPort}/v1/chat/completions`;

  const admin = new pg.Pool({ connectionString: db.databaseUrl, max: 1 });

  const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });
  const payload = JSON.stringify({ model: 'fixed', messages: [{ role: 'user', content: 'Say hello in one short sentence.' }], max_tokens: 16 });
  const once = (url, auth) =>
    new Promise((resolve, reject) => {
      const req = http.request(url, { method: 'POST', agent, headers: { authorization: auth, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(payload);
    });

  console.log(`atelier floor benchmark — ${machine()}; ${SECONDS}s per run, ${CONNECTIONS} connections; the chat path's topology with nothing of atelier's on it`);
  for (const withPg of variants) {
    const skeleton = await startSkeleton({ port: await freePort(), prefix: `atelier-floor-${randomUUID().slice(0, 8)}`, upstreamUrl, upstreamKey: API_KEY, ...(withPg ? { databaseUrl: db.databaseUrl } : {}) });
    const groups = { ...skeleton.pids, upstream: [upstream.pid], postgres: 'postgres', redis: 'redis-server', client: [process.pid] };
    const gatewayUrl = skeleton.url;
    // Warm-up: JIT and connections.
    await closedLoop(() => once(upstreamUrl, `Bearer ${API_KEY}`), CONNECTIONS, 2);
    await closedLoop(() => once(gatewayUrl, ''), CONNECTIONS, 3);
    const { direct, through } = await closedLoopsInTurns(
      { direct: { send: () => once(upstreamUrl, `Bearer ${API_KEY}`), groups }, through: { send: () => once(gatewayUrl, ''), groups } },
      { connections: CONNECTIONS, seconds: SECONDS, rounds: ROUNDS },
    );
    console.log(`\n${withPg ? 'with' : 'without'} a Postgres reservation and settlement per request`);
    console.log(`   direct to upstream      ${direct.rps.toFixed(0)} req/s  errors ${direct.errors}`);
    console.log(`   through the skeleton    ${through.rps.toFixed(0)} req/s  errors ${through.errors}`);
    console.log(`   skeleton / direct       ${((100 * through.rps) / direct.rps).toFixed(1)} %`);
    console.log(`   CPU per request, direct:    ${direct.cpu.line}`);
    console.log(`   CPU per request, skeleton:  ${through.cpu.line}`);
    if (withPg) {
      const { rows } = await admin.query(`SELECT count(*) FILTER (WHERE status = 'open')::int AS open, count(*)::int AS total FROM credit_reservations`);
      console.log(`   reservations: ${rows[0].total} taken, ${rows[0].open} still open`);
    }
    await skeleton.stop();
  }
  await admin.end();
  agent.destroy();
  for (const c of children) c.kill('SIGKILL');
  await db.drop();
}
