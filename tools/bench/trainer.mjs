#!/usr/bin/env node
// npm run bench:trainer — the trainer protocol as deployed: the gateway and the fine-tune service in
// fresh processes of their own, trainers simulated from this process.
// 1. Event ingestion: trainers each on their own lease, POST .../events of 10 events per call, each
//    call with the next seq (so every event is applied, not skipped as a repeat); events/s and the
//    latency per call, beside an authenticated GET of a model on the same connections.
// 2. The idle long-poll: trainers waiting 30 s for runs that never come; the gateway's CPU (read
//    from /proc) over 10 s of the wait (after each poll's one claim), beside 10 s with none waiting.
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import autocannon from 'autocannon';
import pg from 'pg';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { benchConfig, benchDatabase, benchTempDir, buildAll, dieWithBench, freePort, machine } from './bench-env.mjs';

const TRAINERS = Number(process.env.BENCH_TRAINERS ?? 20);
const IDLE_POLLERS = Number(process.env.BENCH_IDLE_POLLERS ?? 200);
const duration = Number(process.env.BENCH_SECONDS ?? 8);

buildAll();
const db = await benchDatabase();
const storage = benchTempDir('trainer');
const config = benchConfig(db, { STORAGE_DIR: storage });
const env = (app, port) => ({
  ...process.env,
  NODE_ENV: 'production',
  LOG_LEVEL: 'error',
  HOST: '127.0.0.1',
  [app === 'gateway' ? 'PORT' : 'FINE_TUNE_PORT']: String(port),
  DATABASE_URL: db.databaseUrl,
  REDIS_URL: config.REDIS_URL,
  REDIS_PREFIX: config.REDIS_PREFIX,
  ADMIN_TOKEN: config.ADMIN_TOKEN,
  URL_SIGNING_SECRET: config.URL_SIGNING_SECRET,
  METRICS_TOKEN: config.METRICS_TOKEN,
  STORAGE_DIR: storage,
  BUILTIN_TRAINER: 'false',
  // Nobody calls in during the idle part: the leases of part 1 must not be swept meanwhile.
  TRAINER_HEARTBEAT_SECONDS: '600',
});
const start = async (app, port) => {
  const child = spawn(process.execPath, [...dieWithBench, `dist/local/apps/${app}/src/main.js`], { env: env(app, port), stdio: ['ignore', 'inherit', 'inherit'] });
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${app} exited with ${child.exitCode}`);
    if (await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.ok, () => false)) return child;
    await new Promise((r) => setTimeout(r, 100));
  }
};
const gatewayPort = await freePort();
const gateway = await start('gateway', gatewayPort);
const fineTune = await start('fine-tune', await freePort());
const base = `http://127.0.0.1:${gatewayPort}`;
const call = async (method, path, token, body, raw) => {
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined || raw ? { 'content-type': raw ? 'application/octet-stream' : 'application/json' } : {}) },
    body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
};
console.log(`atelier trainer protocol benchmark — ${machine()}`);

// Set-up through the API: a user with a dataset, TRAINERS fine-tunes enqueued, one lease each.
const user = await call('POST', '/api/admin/users', config.ADMIN_TOKEN, { username: 'bench', credits: '1000000' });
const key = user.api_key;
await call('POST', '/api/repos', key, { namespace: user.namespace, name: 'ds' });
const form = new FormData();
const rows = Array.from({ length: 50 }, (_, i) => i);
form.append('files[]', new Blob([parquetWriteBuffer({ columnData: [
  { name: 'question', data: rows.map((i) => `question ${i}?`), type: 'STRING' },
  { name: 'answer', data: rows.map((i) => `answer ${i}.`), type: 'STRING' },
] })]), 'qa.parquet');
const up = await fetch(`${base}/api/repos/${user.namespace}/ds/file/main/`, { method: 'PUT', headers: { authorization: `Bearer ${key}` }, body: form });
if (up.status !== 201) throw new Error(`upload: ${up.status}`);
const trainer = await call('POST', '/api/admin/trainers', config.ADMIN_TOKEN, { name: 'bench', base_models: ['Qwen/Qwen3-0.6B'] });
const fineTunes = `/api/repos/${user.namespace}/ds/fine_tunes`;
for (let i = 0; i < TRAINERS; i++) {
  const { fine_tune } = await call('POST', fineTunes, key, { base_model: 'Qwen/Qwen3-0.6B', script_type: 'text_generation', resource: 'main/qa.parquet', training_params: { question_column: 'question', answer_column: 'answer' } });
  await call('POST', `${fineTunes}/${fine_tune.id}/tokenize`, key);
  for (;;) {
    const { fine_tune: ft } = await call('GET', `${fineTunes}/${fine_tune.id}`, key);
    if (ft.status === 'tokenized') break;
    if (ft.status === 'errored') throw new Error(ft.error);
    await new Promise((r) => setTimeout(r, 50));
  }
  await call('POST', `${fineTunes}/${fine_tune.id}/actions/run`, key);
}
const leases = [];
for (let i = 0; i < TRAINERS; i++) leases.push((await call('POST', '/api/trainer/lease', trainer.token, { wait_seconds: 5 })).lease_id);

// 1. Event ingestion: one connection per lease, as a trainer calls in; each call's seq follows the last.
const EVENTS_PER_CALL = 10;
const runs = await Promise.all(
  leases.map((lease) => {
    let seq = 0;
    return autocannon({
      url: `${base}/api/trainer/leases/${lease}/events`,
      connections: 1,
      duration,
      requests: [
        {
          method: 'POST',
          headers: { authorization: `Bearer ${trainer.token}`, 'content-type': 'application/json' },
          setupRequest: (req) => ({
            ...req,
            body: JSON.stringify({ events: Array.from({ length: EVENTS_PER_CALL }, () => ({ seq: ++seq, type: 'metrics', step: seq, loss: 1 / seq, learning_rate: 0.0001 })) }),
          }),
        },
      ],
    });
  }),
);
const calls = runs.reduce((n, r) => n + r.requests.total, 0);
const non2xx = runs.reduce((n, r) => n + r.non2xx, 0);
const p99 = Math.max(...runs.map((r) => r.latency.p99));
const p50 = runs.map((r) => r.latency.p50).sort((a, b) => a - b)[Math.floor(runs.length / 2)];
console.log(
  `event ingestion (${TRAINERS} trainers, one lease and connection each, ${EVENTS_PER_CALL} events per call, ${duration}s): ${Math.round((calls * EVENTS_PER_CALL) / duration)} events/s, ${Math.round(calls / duration)} calls/s, per call p50 ${p50} ms, p99 ${p99} ms, non-2xx ${non2xx}`,
);
const floor = await autocannon({ url: `${base}/api/ai/models/local-chat`, connections: TRAINERS, duration: Math.max(2, duration / 2), headers: { authorization: `Bearer ${key}` } });
console.log(`  beside it, an authenticated GET of a model (same connections): ${Math.round(floor.requests.average)} req/s, p50 ${floor.latency.p50} ms, p99 ${floor.latency.p99} ms`);
const logged = new pg.Client({ connectionString: db.databaseUrl });
await logged.connect();
const { rows: [{ n }] } = await logged.query(`SELECT count(*)::int AS n FROM fine_tune_logs`);
console.log(`  events stored: ${n} (every call's events applied once)`);

// 2. The idle long-poll: IDLE_POLLERS trainers of a base model nothing is enqueued for.
const idleTrainer = await call('POST', '/api/admin/trainers', config.ADMIN_TOKEN, { name: 'idle', base_models: ['Qwen/Qwen3-4B'] });
const cpuMs = () => {
  const fields = readFileSync(`/proc/${gateway.pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
};
const span = 10_000;
const cpuOver = async (ms) => {
  const before = cpuMs();
  await new Promise((r) => setTimeout(r, ms));
  return cpuMs() - before;
};
const quiet = await cpuOver(span);
const polls = Array.from({ length: IDLE_POLLERS }, () =>
  fetch(`${base}/api/trainer/lease`, { method: 'POST', headers: { authorization: `Bearer ${idleTrainer.token}`, 'content-type': 'application/json' }, body: '{"wait_seconds":30}' }),
);
// Each poll claims once as it arrives; what follows is the wait itself.
await new Promise((r) => setTimeout(r, 3_000));
const waiting = await cpuOver(span);
console.log(
  `idle long-poll: ${IDLE_POLLERS} trainers waiting (wait_seconds 30): gateway CPU ${Math.round(waiting)} ms over ${span / 1000} s of the wait, beside ${Math.round(quiet)} ms over ${span / 1000} s with none waiting (one claim query per poll, none while it waits)`,
);
const answers = await Promise.all(polls);
console.log(`  their answers at 30 s: ${answers.filter((r) => r.status === 204).length} x 204`);

// For bench:report (BENCH_JSON): this run's figures.
if (process.env.BENCH_JSON)
  writeFileSync(
    process.env.BENCH_JSON,
    JSON.stringify({
      ingestion: { eventsPerSecond: (calls * EVENTS_PER_CALL) / duration, callP50: p50, callP99: p99, floorRps: floor.requests.average },
      idle: { waitingCpuMs: waiting, quietCpuMs: quiet, pollers: IDLE_POLLERS },
    }),
  );

await logged.end();
gateway.kill('SIGTERM');
fineTune.kill('SIGTERM');
await db.drop();
process.exit(0);
