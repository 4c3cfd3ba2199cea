#!/usr/bin/env node
// npm run bench:gateway — authenticated requests through the real gateway over real HTTP: what
// every API call pays (Fastify, the access guard with its API-key cache, routing, the error
// envelope), and the read endpoints clients poll, each with its database read.
//
// The gateway runs as compiled code in a process of its own, so the gateway's CPU per request
// (from /proc, beside the rate) is its own and not the load generator's. Each case is a closed
// loop of BENCH_CONNECTIONS (default 32) for BENCH_SECONDS (default 4) after a second of
// warm-up, three times; the median round is shown.
//
// BENCH_GATEWAY_ROOT=<another checkout> runs the same cases against that checkout's compiled
// gateway too (build it first: `node node_modules/@swc/cli/bin/swc.js apps libs -d dist/local
// --config-file .swcrc` there), alternating with this one's in fresh processes, three pairs: how a
// change moved each figure, measured side by side. BENCH_LOG_LEVEL=info measures at the default
// level (the benches run at error): the access lines go to a pipe, and their bytes per request show.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

const self = fileURLToPath(import.meta.url);

if (process.argv[2] === 'serve') {
  // The checkout being measured: its compiled gateway, through its own bench-env.
  const benchEnv = await import(path.join(process.env.BENCH_GATEWAY_CHECKOUT, 'tools/bench/bench-env.mjs'));
  const { benchConfig, startBenchGateway } = benchEnv;
  // BENCH_LOG_LEVEL=info: what the default level's access line costs (the benches run at error).
  const config = benchConfig(JSON.parse(process.env.BENCH_GATEWAY_DB), process.env.BENCH_LOG_LEVEL ? { LOG_LEVEL: process.env.BENCH_LOG_LEVEL } : {});
  const { base, user } = await startBenchGateway(config, 1000);
  // Checkouts whose gateway reads datasets through the fine-tune service need it for the fine-tune below.
  await benchEnv.startBenchFineTune?.(config);
  const post = async (url, token, body) => {
    const res = await fetch(`${base}${url}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    if (res.status >= 300) throw new Error(`${url}: ${res.status} ${await res.text()}`);
    return res.json();
  };
  // An org the bench user belongs to (a namespace besides their own), and a generation to poll
  // (queued: no queue worker runs, so its record carries its queue position).
  const org = `bench-org-${process.pid}`;
  await post('/api/admin/orgs', config.ADMIN_TOKEN, { name: org, members: [user.username], credits: '1000' });
  const queued = await post('/api/ai/queue', user.api_key, { model: 'local-image', prompt: 'a fox', target_namespace: org });
  // A fine-tune to poll: a repository with a small question/answer dataset.
  const repo = 'bench-ds';
  await post('/api/repos', user.api_key, { namespace: user.username, name: repo });
  const { parquetWriteBuffer } = await import('hyparquet-writer');
  const dataset = Buffer.from(
    parquetWriteBuffer({
      columnData: [
        { name: 'question', data: ['What is 1 + 1?', 'What is 2 + 2?'], type: 'STRING' },
        { name: 'answer', data: ['It is 2.', 'It is 4.'], type: 'STRING' },
      ],
    }),
  );
  const boundary = '----benchgateway';
  const upload = await fetch(`${base}/api/repos/${user.username}/${repo}/file/main/`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${user.api_key}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
    body: Buffer.concat([
      Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="qa.parquet"\r\ncontent-type: application/octet-stream\r\n\r\n`),
      dataset,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]),
  });
  if (upload.status !== 201) throw new Error(`uploading the dataset: ${upload.status} ${await upload.text()}`);
  const fineTune = await post(`/api/repos/${user.username}/${repo}/fine_tunes`, user.api_key, {
    resource: 'main/qa.parquet',
    base_model: 'Qwen/Qwen3-0.6B',
    script_type: 'text_generation',
    training_params: { question_column: 'question', answer_column: 'answer' },
  });
  process.send({ base, apiKey: user.api_key, org, generationId: queued.generations[0].generation_id, fineTune: `/api/repos/${user.username}/${repo}/fine_tunes/${fineTune.fine_tune.id}` });
} else {
  const { benchDatabase, buildAll, cpuSeconds, dieWithBench, machine, percentile } = await import('./bench-env.mjs');
  const { root } = await import('../bootstrap.mjs');
  const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
  const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
  const ROUNDS = 3;
  const other = process.env.BENCH_GATEWAY_ROOT ? path.resolve(process.env.BENCH_GATEWAY_ROOT) : undefined;
  buildAll();

  const cases = [
    ['GET /health/live (no auth)', () => '/health/live'],
    ['GET /api/ai/models/local-image (auth, catalog)', () => '/api/ai/models/local-image'],
    ['GET /api/ai/models/nope (auth, 404 envelope)', () => '/api/ai/models/nope', 404],
    ['GET /api/credits (auth, Postgres read)', () => '/api/credits'],
    ["GET /api/credits?namespace=<org> (the caller's org)", (s) => `/api/credits?namespace=${s.org}`],
    ['GET /api/ai/queue/:id (a generation polled)', (s) => `/api/ai/queue/${s.generationId}`],
    ['GET /api/ai/queue?namespace=<org> (active generations)', (s) => `/api/ai/queue?namespace=${s.org}`],
    ['GET /api/ai/queue?namespace=<org>&status=queued&model=...', (s) => `/api/ai/queue?namespace=${s.org}&status=queued&model=local-image`],
    ['GET /api/repos/:ns/:repo/fine_tunes/:id (a fine-tune polled)', (s) => s.fineTune],
    ["GET /api/repos/:ns/:repo/fine_tunes (a repository's fine-tunes)", (s) => s.fineTune.replace(/\/[^/]+$/, '')],
  ];

  /** One checkout's gateway in a fresh process on a fresh database: every case, ROUNDS rounds each; the median round of each. */
  const measure = async (checkout) => {
    const db = await benchDatabase();
    const child = spawn(process.execPath, [...dieWithBench, self, 'serve'], {
      cwd: checkout,
      env: { ...process.env, BENCH_GATEWAY_CHECKOUT: checkout, BENCH_GATEWAY_DB: JSON.stringify({ databaseUrl: db.databaseUrl, prefix: db.prefix }) },
      // Its log lines go to a pipe, drained here, as a container runtime drains a pod's.
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    });
    let logged = 0;
    child.stdout.on('data', (chunk) => (logged += chunk.length));
    try {
      const served = await new Promise((resolve, reject) => {
        child.once('message', resolve);
        child.once('exit', (code) => reject(new Error(`the gateway exited (${code})`)));
      });
      const results = [];
      for (const [label, url, status = 200] of cases) {
        const opts = { url: `${served.base}${url(served)}`, connections: CONNECTIONS, headers: { authorization: `Bearer ${served.apiKey}` } };
        await autocannon({ ...opts, duration: 1 });
        const rounds = [];
        for (let i = 0; i < ROUNDS; i++) {
          const before = cpuSeconds({ gateway: [child.pid] });
          const loggedBefore = logged;
          const r = await autocannon({ ...opts, duration: SECONDS });
          const after = cpuSeconds({ gateway: [child.pid] });
          const answered = r.requests.total;
          const unexpected = status === 200 ? r.non2xx : answered - (r[`${Math.floor(status / 100)}xx`] ?? 0);
          rounds.push({ rps: r.requests.average, p99: r.latency.p99, cpu: ((after.gateway.all - before.gateway.all) * 1000) / answered, logBytes: (logged - loggedBefore) / answered, errors: r.errors + unexpected });
        }
        rounds.sort((a, b) => a.cpu - b.cpu);
        results.push({ label, ...rounds[1], errors: rounds.reduce((s, r) => s + r.errors, 0) });
      }
      return results;
    } finally {
      child.kill('SIGKILL');
      await new Promise((resolve) => (child.exitCode === null && child.signalCode === null ? child.once('exit', resolve) : resolve()));
      await db.drop();
    }
  };

  console.log(`atelier gateway benchmark — ${machine()}; ${CONNECTIONS} connections, ${ROUNDS} rounds of ${SECONDS}s per case (median round); the gateway in its own process`);
  const line = (r) =>
    `${r.label.padEnd(58)} ${Math.round(r.rps).toString().padStart(7)} req/s  p99 ${String(r.p99).padStart(3)} ms  gateway CPU ${r.cpu.toFixed(4)} ms/request  log ${Math.round(r.logBytes)} B/request  errors ${r.errors}`;
  if (!other) {
    for (const r of await measure(root)) console.log(line(r));
  } else {
      console.log(`A: ${other}\nB: ${root} (this checkout)`);
      const runs = { A: [], B: [] };
      for (let pair = 0; pair < 3; pair++) {
      // The order alternates too: whichever runs first in a pair meets a machine just idle.
      const order = [['A', other], ['B', root]];
      for (const [name, checkout] of pair % 2 ? order.reverse() : order) runs[name].push(await measure(checkout));
    }
      for (const [i, [label]] of cases.entries()) {
        console.log(label);
        for (const name of ['A', 'B'])
          console.log(
            `   ${name}  gateway CPU ${runs[name].map((r) => r[i].cpu.toFixed(4)).join(' / ')} ms/request   ${runs[name].map((r) => Math.round(r[i].rps)).join(' / ')} req/s   errors ${runs[name].reduce((s, r) => s + r[i].errors, 0)}`,
          );
        const median = (name) => percentile(runs[name].map((r) => r[i].cpu), 0.5);
        console.log(`   B / A (medians)  ${((100 * median('B')) / median('A')).toFixed(1)} % of the CPU`);
      }
  }
}
