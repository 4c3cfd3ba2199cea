#!/usr/bin/env node
// npm run bench:cluster — atelier on one Redis node beside atelier on a three-primary Redis
// Cluster, in the same run: the rate each sustains and where the cluster's commands land.
//
// The bench starts both Redis deployments itself from the same redis-server with the same flags
// (no persistence): one node, and three primaries joined by `redis-cli --cluster create`. On each
// runs a stack as deployed (the gateway, the chat service and an image queue-worker, each its own
// process from compiled code with production settings, on its own fresh database), in front of one
// fake OpenAI-compatible upstream. The stacks take turns (BENCH_LOOP_ROUNDS rounds, default 3):
//   chat:  a closed loop of non-streamed chat completions (BENCH_CONNECTIONS, default 64) for
//          BENCH_SECONDS / rounds (default 10 s in all), answered requests per second;
//   queue: BENCH_QUEUE_N image generations (64 px, default 200) enqueued 8 requests in flight, four
//          to a request, until the owner's event stream announced every one: generations per second.
// Around each turn, `INFO commandstats` of every node: Redis commands per request, and each
// primary's share of the cluster's (the load must spread), and each redis-server's CPU time.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { Redis } from 'ioredis';
import { benchCatalog, benchDatabase, benchTempDir, BENCH_METRICS_TOKEN, buildAll, cpuSeconds, dieWithBench, freePort, machine, percentile, spawnUntilReady, startFakeUpstream } from './bench-env.mjs';

const ROUNDS = Number(process.env.BENCH_LOOP_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const QUEUE_N = Number(process.env.BENCH_QUEUE_N ?? 200);
const API_KEY_ENV = 'BENCH_UPSTREAM_API_KEY';
const API_KEY = 'sk-bench-upstream-key';
const ADMIN_TOKEN = randomBytes(32).toString('hex');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

buildAll();
const children = [];
const databases = [];
const cleanup = async () => {
  for (const c of children) c.kill('SIGTERM');
  await Promise.all(children.map((c) => new Promise((r) => (c.exitCode !== null || c.signalCode !== null ? r() : c.once('exit', r)))));
  for (const db of databases) await db.drop().catch(() => undefined);
};
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => void cleanup().then(() => process.exit(130)));
process.on('exit', () => children.forEach((c) => c.kill('SIGKILL')));

function startNode(name, args, env, probe) {
  const { child, ready } = spawnUntilReady(name, process.execPath, [...dieWithBench, ...args], env, probe);
  children.push(child);
  return ready;
}
const healthy = (port) => async () => (await fetch(`http://127.0.0.1:${port}/health`)).ok;

// ---- Redis: one node, and a cluster of three primaries ------------------------------------------
async function redisServer(extra = []) {
  const port = await freePort();
  const dir = benchTempDir(`redis-${port}`);
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...extra], { stdio: 'ignore' });
  children.push(child);
  for (let i = 0; i < 200 && spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8' }).stdout.trim() !== 'PONG'; i++) await sleep(25);
  return { port, pid: child.pid, client: new Redis({ port }) };
}
const single = await redisServer();
const primaries = await Promise.all([0, 1, 2].map(() => redisServer(['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf'])));
const created = spawnSync('redis-cli', ['--cluster', 'create', ...primaries.map((p) => `127.0.0.1:${p.port}`), '--cluster-replicas', '0', '--cluster-yes'], { encoding: 'utf8' });
if (created.status !== 0) throw new Error(`redis-cli --cluster create failed: ${created.stderr}`);
for (let i = 0; i < 100 && !(await Promise.all(primaries.map((p) => p.client.cluster('INFO')))).every((info) => info.includes('cluster_state:ok')); i++) await sleep(100);

// ---- the two stacks ----------------------------------------------------------------------------
const upstreamUrl = await startFakeUpstream(startNode, API_KEY);
const catalogDir = benchCatalog({ upstreamUrl, upstreamModel: 'fixed', apiKeyEnv: API_KEY_ENV, description: 'The fake upstream, through the openai-compatible provider' });

async function startStack(name, redisEnv, nodes) {
  const db = await benchDatabase();
  databases.push(db);
  const ports = { gateway: await freePort(), chat: await freePort(), 'queue-worker': await freePort() };
  const portVar = { gateway: 'PORT', chat: 'CHAT_PORT', 'queue-worker': 'QUEUE_WORKER_PORT' };
  const env = {
    NODE_ENV: 'production',
    LOG_LEVEL: 'error',
    HOST: '127.0.0.1',
    DATABASE_URL: db.databaseUrl,
    REDIS_PREFIX: db.prefix,
    ADMIN_TOKEN,
    URL_SIGNING_SECRET: randomBytes(32).toString('hex'),
    METRICS_TOKEN: BENCH_METRICS_TOKEN,
    MODEL_CATALOG_DIR: catalogDir,
    STORAGE_DIR: benchTempDir(`blobs-${name}`),
    QUEUE_WORKER_POOLS: 'image',
    [API_KEY_ENV]: API_KEY,
    ...redisEnv,
  };
  const pids = {};
  await Promise.all(
    Object.entries(ports).map(async ([app, port]) => {
      const child = await startNode(`${name} ${app}`, [`dist/local/apps/${app}/src/main.js`], { ...env, [portVar[app]]: String(port) }, healthy(port));
      pids[app] = [child.pid];
    }),
  );
  const base = `http://127.0.0.1:${ports.gateway}`;
  const res = await fetch(`${base}/api/admin/users`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ username: 'bench', credits: '1000000' }) });
  if (res.status !== 201) throw new Error(`${name}: creating the bench user failed: ${res.status} ${await res.text()}`);
  const user = await res.json();
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const request = (method, route, body) =>
    new Promise((resolve, reject) => {
      const req = http.request(`${base}${route}`, { method, agent, headers: { authorization: `Bearer ${user.api_key}`, 'content-type': 'application/json' } }, (r) => {
        let text = '';
        r.setEncoding('utf8');
        r.on('data', (d) => (text += d));
        r.on('end', () => (r.statusCode >= 400 ? reject(new Error(`${method} ${route}: ${r.statusCode} ${text.slice(0, 300)}`)) : resolve(text)));
      });
      req.on('error', reject);
      req.end(body === undefined ? undefined : JSON.stringify(body));
    });
  const groups = { ...pids, redis: nodes.map((n) => n.pid) };
  return { name, base, user, request, agent, nodes, groups };
}
const stacks = [await startStack('one node', { REDIS_URL: `redis://127.0.0.1:${single.port}` }, [single]), await startStack('cluster', { REDIS_CLUSTER_NODES: primaries.map((p) => `127.0.0.1:${p.port}`).join(',') }, primaries)];

// ---- measures ----------------------------------------------------------------------------------
async function calls(node) {
  let total = 0;
  for (const m of (await node.client.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) total += Number(m[2]);
  return total;
}
async function around(stack, work) {
  const before = await Promise.all(stack.nodes.map(calls));
  const cpu0 = cpuSeconds(stack.groups);
  const started = performance.now();
  const n = await work();
  const ms = performance.now() - started;
  const cpu1 = cpuSeconds(stack.groups);
  // Our own INFO on each node is one call.
  const perNode = (await Promise.all(stack.nodes.map(calls))).map((c, i) => c - before[i] - 1);
  return { n, ms, perNode, cpu: Object.fromEntries(Object.keys(stack.groups).map((k) => [k, (cpu1[k].all - cpu0[k].all) * 1000])) };
}
const chatBody = { model: 'bench-remote', messages: [{ role: 'user', content: 'Say hello in one short sentence.' }] };
async function chatTurn(stack, seconds) {
  let ok = 0;
  const latencies = [];
  const deadline = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < deadline) {
        const sent = performance.now();
        await stack.request('POST', '/api/ai/chat/completions', chatBody);
        latencies.push(performance.now() - sent);
        ok++;
      }
    }),
  );
  return { ok, latencies };
}
async function queueTurn(stack, n) {
  const seen = new Set();
  const ac = new AbortController();
  const res = await fetch(`${stack.base}/api/events`, { headers: { authorization: `Bearer ${stack.user.api_key}` }, signal: ac.signal });
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
        const data = frame.includes('event: media_generation_completed') && /^data: (.*)$/m.exec(frame)?.[1];
        if (data) seen.add(JSON.parse(data).generation_id);
      }
      if (seen.size >= n) all();
    }
  })().catch(() => undefined);
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < n) {
        const count = Math.min(4, n - next);
        next += count;
        await stack.request('POST', '/api/ai/queue', { model: 'local-image', prompt: `a harbour ${next}`, width: 64, height: 64, num_generations: count });
      }
    }),
  );
  await Promise.race([done, sleep(180_000)]);
  ac.abort();
  if (seen.size < n) throw new Error(`${stack.name}: only ${seen.size} of ${n} completion events arrived`);
  return n;
}

console.log(`atelier on one Redis node and on a three-primary Redis Cluster — ${machine()}; ${ROUNDS} rounds, ${CONNECTIONS} connections, ${QUEUE_N} generations a queue turn`);
// Warm both: code paths compiled, connections open.
for (const s of stacks) {
  await chatTurn(s, 1);
  await queueTurn(s, 8);
}
const totals = Object.fromEntries(stacks.map((s) => [s.name, { chat: { n: 0, ms: 0, perNode: s.nodes.map(() => 0), cpu: {}, latencies: [], rates: [] }, queue: { n: 0, ms: 0, perNode: s.nodes.map(() => 0), cpu: {}, rates: [] } }]));
const add = (t, r) => {
  t.n += r.n;
  t.ms += r.ms;
  r.perNode.forEach((c, i) => (t.perNode[i] += c));
  for (const [k, v] of Object.entries(r.cpu)) t.cpu[k] = (t.cpu[k] ?? 0) + v;
  t.rates.push((r.n / r.ms) * 1000);
};
for (let round = 0; round < ROUNDS; round++) {
  for (const s of round % 2 ? [...stacks].reverse() : stacks) {
    let latencies = [];
    const chat = await around(s, async () => {
      const r = await chatTurn(s, SECONDS / ROUNDS);
      latencies = r.latencies;
      return r.ok;
    });
    add(totals[s.name].chat, chat);
    for (const l of latencies) totals[s.name].chat.latencies.push(l);
    await sleep(500);
    add(totals[s.name].queue, await around(s, () => queueTurn(s, QUEUE_N)));
    await sleep(500);
  }
}

const median = (xs) => percentile(xs, 0.5);
for (const kind of ['chat', 'queue']) {
  const unit = kind === 'chat' ? 'req/s' : 'generations/s';
  console.log(`\n${kind === 'chat' ? 'Chat completions, closed loop' : `Queue: ${QUEUE_N} image generations a turn, enqueue to completion event`}`);
  for (const s of stacks) {
    const t = totals[s.name][kind];
    const commands = t.perNode.reduce((a, b) => a + b, 0);
    const shares = s.nodes.length > 1 ? ` (per primary: ${t.perNode.map((c) => `${((c / commands) * 100).toFixed(0)} %`).join(' / ')})` : '';
    const p50 = kind === 'chat' ? `, p50 ${median(t.latencies).toFixed(2)} ms` : '';
    console.log(
      `   ${s.name.padEnd(8)} ${median(t.rates).toFixed(kind === 'chat' ? 0 : 1)} ${unit} (turns ${t.rates.map((r) => r.toFixed(kind === 'chat' ? 0 : 1)).join(', ')})${p50}; ${(commands / t.n).toFixed(1)} Redis commands per ${kind === 'chat' ? 'request' : 'generation'}${shares}; Redis CPU ${(t.cpu.redis / t.n).toFixed(3)} ms, gateway ${(t.cpu.gateway / t.n).toFixed(3)} ms`,
    );
  }
  const [a, b] = stacks.map((s) => median(totals[s.name][kind].rates));
  console.log(`   cluster / one node: ${(b / a).toFixed(2)}`);
}
if (process.env.BENCH_CLUSTER_JSON) fs.writeFileSync(path.resolve(process.env.BENCH_CLUSTER_JSON), JSON.stringify({ machine: machine(), totals }, null, 2));

for (const s of stacks) s.agent.destroy();
for (const n of [single, ...primaries]) n.client.disconnect();
await cleanup();
// The event streams' readers and the keep-alive agent's sockets may still hold the loop a while.
process.exit(0);
