#!/usr/bin/env node
// npm run bench:report — runs bench:chat, bench:queue, bench:media and bench:trainer three times each (BENCH_ROUNDS; one
// round after another, so each figure is measured beside its direct path in the same run) and
// writes docs/benchmarks.md: the hot-path targets, the median of the runs, every run, and
// the machine. Run it alone on the machine: anything beside it falsifies the figures.
// Env: BENCH_ROUNDS (default 3), BENCH_REPORT (output file, default docs/benchmarks.md).
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureRuntime, root } from '../bootstrap.mjs';
import { benchTempDir, dieWithBench } from './bench-env.mjs';

ensureRuntime();
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const OUT = path.resolve(root, process.env.BENCH_REPORT ?? 'docs/benchmarks.md');
const tmp = benchTempDir('report');

function run(bench, round) {
  const file = path.join(tmp, `${bench}-${round}.json`);
  console.log(`bench:${bench}, run ${round} of ${ROUNDS} ...`);
  const args = bench === 'queue' ? ['--expose-gc'] : [];
  // Linked like the services (dieWithBench): a killed report stops its bench, which cleans up.
  const r = spawnSync(process.execPath, [...dieWithBench, ...args, path.join(root, `tools/bench/${bench}.mjs`)], {
    cwd: root,
    stdio: ['ignore', 'inherit', 'inherit', 'pipe'],
    env: { ...process.env, BENCH_JSON: file },
  });
  if (r.status !== 0 || !fs.existsSync(file)) throw new Error(`bench:${bench} failed (exit ${r.status})`);
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

const runs = { chat: [], queue: [], media: [], trainer: [] };
for (let round = 1; round <= ROUNDS; round++) for (const bench of Object.keys(runs)) runs[bench].push(run(bench, round));

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};
const at = (obj, dotted) => dotted.split('.').reduce((o, k) => o?.[k], obj);
const fmt = (v, digits) => (Number.isFinite(v) ? v.toFixed(digits) : '–');

/** One table row: the median of a figure over the runs, each run, and its direct path beside it. */
function row(label, target, bench, key, { unit = 'ms', digits = 2, met, direct, directLabel, unitBeside = unit } = {}) {
  const values = runs[bench].map((r) => at(r, key));
  const m = median(values);
  // A count (unit '') has no unit to print after it.
  const withUnit = (text, u) => (u ? `${text} ${u}` : text);
  const besides = direct ? `${directLabel}: ${withUnit(fmt(median(runs[bench].map((r) => at(r, direct))), unitBeside === unit ? digits : 0), unitBeside)}` : '';
  const verdict = met ? (met(m) ? 'yes' : 'no') : '–';
  return `| ${label} | ${target} | **${withUnit(fmt(m, digits), unit)}** | ${values.map((v) => fmt(v, digits)).join(' / ')} | ${besides} | ${verdict} |`;
}

const cpu = (fs.readFileSync('/proc/cpuinfo', 'utf8').match(/model name\s*:\s*(.*)/) ?? [])[1] ?? os.cpus()[0]?.model ?? 'unknown';
let commit = 'unknown';
try {
  commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
} catch {
  // not a git checkout
}
const billing = runs.chat.every((r) => r.throughput?.billingOk);
const floorShare = median(runs.chat.map((r) => at(r, 'throughput.floorPercentOfDirect')));
const floorRate = median(runs.chat.map((r) => at(r, 'throughput.floor')));
const lines = [
  '# Benchmarks',
  '',
  `Measured ${new Date().toISOString().slice(0, 10)} at commit \`${commit}\` with \`npm run bench:report\`, which runs`,
  `\`npm run bench:chat\`, \`bench:queue\`, \`bench:media\` and \`bench:trainer\` ${ROUNDS === 1 ? 'once' : `${['two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine'][ROUNDS - 2] ?? ROUNDS} times`} each and writes this page. Every service runs as`,
  'compiled code with production settings, co-located on one machine with Postgres, Redis, a fake upstream and the load',
  'generator, with API-key auth, validation and credit reservation and settlement on.',
  '',
  `- Machine: ${os.cpus().length} vCPUs (${cpu}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.type()} ${os.release()}`,
  `- Node ${process.version}; ${ROUNDS} runs of each bench, one after another`,
  `- Billing check of every chat run (each answered request charged exactly once, nothing left reserved, a usage row for every closed chat reservation): ${billing ? 'exact' : 'MISMATCH'}`,
  '',
  'Each figure is the median of the runs (all runs shown). The chat figures are what the gateway adds to the same request',
  'sent straight to the upstream in the same run; that direct figure is shown beside. Machines differ from each other by',
  '2x and more, so compare the added time and the ratios, not the absolute figures, with another machine.',
  '',
  '| Figure | Target | Median | Runs | Direct path, same runs (median) | Met |',
  '|---|---|---|---|---|---|',
  row('chat, one request at a time, added p50', '<= 1.5 ms', 'chat', 'sequential.addedP50', { met: (v) => v <= 1.5, direct: 'sequential.direct', directLabel: 'upstream p50' }),
  row('chat, one request at a time, added p99', '<= 4 ms', 'chat', 'sequential.addedP99', { met: (v) => v <= 4 }),
  row("... the floor's added p99 one at a time, run after the gateway (see \"floor\" below)", '', 'chat', 'sequential.floorAddedP99', { direct: 'sequential.floorAddedP50', directLabel: "the floor's added p50" }),
  row('chat after 6 s idle, one request at a time, added p50 (see "after 6 s idle" below)', '', 'chat', 'afterIdle.addedP50', { direct: 'afterIdle.direct', directLabel: 'upstream p50' }),
  row('chat at 500 req/s, added p50', '<= 3 ms', 'chat', 'rate.addedP50', { met: (v) => v <= 3, direct: 'rate.direct.p50', directLabel: 'upstream p50' }),
  row('chat at 500 req/s, added p99', '<= 15 ms', 'chat', 'rate.addedP99', { met: (v) => v <= 15, direct: 'rate.direct.p99', directLabel: 'upstream p99' }),
  row('... of its first second (after the gateway sat idle through the direct run; see below)', '', 'chat', 'rate.firstSecondAddedP99'),
  row('... after its first second (steady state)', '', 'chat', 'rate.afterFirstSecondAddedP99'),
  row("... the floor's added p99 at the same rate, run after the gateway (see \"floor\" below)", '', 'chat', 'rate.floor.addedP99'),
  row('... CPU per request, every process (gateway, chat service, Postgres, Redis, upstream, client; see below)', '', 'chat', 'rate.cpuPerRequest', { digits: 3, direct: 'rate.directCpuPerRequest', directLabel: 'direct' }),
  row('... wake-ups per request, every process', '', 'chat', 'rate.wakeupsPerRequest', { unit: '', digits: 1, direct: 'rate.directWakeupsPerRequest', directLabel: 'direct' }),
  row('... time woken threads waited for a CPU, per request, every process', '', 'chat', 'rate.runWaitPerRequest', { digits: 3, direct: 'rate.directRunWaitPerRequest', directLabel: 'direct' }),
  row("... the floor's CPU per request at that rate, every process", '', 'chat', 'rate.floor.cpuPerRequest', { digits: 3, direct: 'rate.floor.runWaitPerRequest', directLabel: 'its wait for a CPU' }),
  row("... the machine's CPU time its hypervisor gave other guests (steal) during the gateway's run", '', 'chat', 'rate.stealPercent', { unit: '%', digits: 1, direct: 'rate.floor.stealPercent', directLabel: "during the floor's" }),
  row('streamed chat at 500 req/s, added time to first byte p50', '<= 3 ms', 'chat', 'rateStream.addedP50', { met: (v) => v <= 3, direct: 'rateStream.direct', directLabel: 'upstream p50' }),
  row('chat closed-loop throughput (64 connections)', '>= 2,500 req/s', 'chat', 'throughput.gateway', { unit: 'req/s', digits: 0, met: (v) => v >= 2500, direct: 'throughput.direct', directLabel: 'upstream' }),
  row('... as a share of the direct rate', '>= 30 %', 'chat', 'throughput.percentOfDirect', { unit: '%', digits: 1, met: (v) => v >= 30 }),
  row("... the floor's rate as a share of the direct rate (see below)", '', 'chat', 'throughput.floorPercentOfDirect', { unit: '%', digits: 1, direct: 'throughput.floor', directLabel: 'the floor', unitBeside: 'req/s' }),
  // Restated target (see "floor" below): the share of the direct rate moves with the machine, the share of the floor does not.
  row("... the gateway's rate as a share of the floor's (see below)", '>= 80 %', 'chat', 'throughput.percentOfFloor', { unit: '%', digits: 1, met: (v) => v >= 80 }),
  row("... the gateway's CPU per chat request", '', 'chat', 'throughput.gatewayCpuPerRequest', { digits: 3, direct: 'throughput.floorGatewayCpuPerRequest', directLabel: "the floor's gateway" }),
  row("... the gateway's CPU per authenticated GET of a model (framework, auth, logging, metrics)", '', 'chat', 'throughput.gatewayCpuPerAuthenticatedGet', { digits: 3 }),
  row("... steal during the gateway's turns", '', 'chat', 'throughput.stealPercent.gateway', { unit: '%', digits: 1, direct: 'throughput.stealPercent.floor', directLabel: "during the floor's" }),
  row('enqueue through the gateway (50 connections)', '>= 2,000/s', 'queue', 'enqueue.rps', { unit: '/s', digits: 0, met: (v) => v >= 2000, direct: 'enqueue.floorRps', directLabel: 'authenticated GET, same connections' }),
  row('enqueue p99', '<= 50 ms', 'queue', 'enqueue.p99', { digits: 0, met: (v) => v <= 50, direct: 'enqueue.floorP99', directLabel: 'authenticated GET p99' }),
  row('sync image hop beyond engine time, p50 (gateway request to reply)', '<= 3 ms', 'media', 'sync.gatewayBeyondEngineP50', { met: (v) => v <= 3 }),
  row("... the floor's request to reply (skeleton: same hops, ledger and store; see \"sync image hop\" below)", '', 'media', 'sync.skeletonP50'),
  // Context for the sync image hop row, which the target is for (bench:media prints it there): this one adds the client's own HTTP stack.
  row('... as the client sees it', '', 'media', 'sync.clientBeyondEngineP50', { direct: 'sync.httpFloorP50', directLabel: "the client's authenticated GET p50" }),
  row("... the media service's handler beyond the engine (storage, the reply sent), mean", '', 'media', 'sync.split.handlerBeyondEngine', { direct: 'sync.split.pickUp', directLabel: 'its wait to pick the job up, mean' }),
  row('Responses API (non-streamed, not stored), one at a time, added p50 over the same upstream', '–', 'chat', 'responses.addedP50', { direct: 'responses.chatAddedP50', directLabel: "chat completions' own added p50" }),
  row('... stored (store: true, the default)', '–', 'chat', 'responses.storedAddedP50', { direct: 'responses.direct', directLabel: 'upstream p50' }),
  row("Messages API (/api/anthropic/v1/messages, streamed), one at a time, added p50 over streamed chat completions' in the same run", '<= 0.3 ms', 'chat', 'messages.overChatP50', { met: (v) => v <= 0.3, direct: 'messages.chatAddedP50', directLabel: "streamed chat completions' own added p50" }),
  row('embeddings, 256 short strings per request (base64), 8 connections', '–', 'chat', 'embeddings.gateway', { unit: 'inputs/s', digits: 0, direct: 'embeddings.direct', directLabel: 'upstream', unitBeside: 'inputs/s' }),
  row('chat with an Idempotency-Key (new key each request), added p50 over the same request without one', '–', 'chat', 'idempotency.addedOverPlainP50'),
  row('chat replayed from its Idempotency-Key, p50 (nothing runs)', '–', 'chat', 'idempotency.replayP50', { direct: 'sequential.gateway', directLabel: 'the request run, p50' }),
  row('chat with a scoped key and rpm (key and namespace), added p50 over an unlimited key', '<= 0.3 ms per check', 'chat', 'governance.levels.rpm.addedP50', { direct: 'governance.plainP50', directLabel: 'the unlimited key, p50' }),
  row('... plus tpm and max_concurrent (key and namespace)', '<= 0.3 ms per check', 'chat', 'governance.levels.rpm + tpm + max_concurrent.addedP50'),
  row('... plus a budget on the key (every governance check)', '<= 0.3 ms per check', 'chat', 'governance.addedP50'),
  row('idle SSE connections, RSS per connection at 10,000 (events app, 100 users, after 30 s)', '<= 10 KB', 'queue', 'sse.rssKbPerConnection', { unit: 'KB', digits: 1, met: (v) => v <= 10 }),
  row('trainer events ingested (20 trainers on their own leases, 10 events per call)', '–', 'trainer', 'ingestion.eventsPerSecond', { unit: '/s', digits: 0, direct: 'ingestion.floorRps', directLabel: 'authenticated GET, same connections', unitBeside: 'req/s' }),
  row('... per call, p99', '–', 'trainer', 'ingestion.callP99', { digits: 0, direct: 'ingestion.callP50', directLabel: 'p50' }),
  row("the gateway's CPU over 10 s of 200 trainers' lease long-polls waiting", '–', 'trainer', 'idle.waitingCpuMs', { digits: 0, direct: 'idle.quietCpuMs', directLabel: 'the same 10 s with none waiting' }),
  '',
  'How to read the rows:',
  '- **added**: gateway figure minus the direct figure of the same run, at the same percentile.',
  '- **log level**: the services run at `LOG_LEVEL=error`, so no access line is written. At the default `info`, each',
  '  request\'s access line cost the gateway 0.013 ms more CPU (an authenticated GET of a model, 32 connections, three',
  '  alternating runs on a 2-core Intel Xeon VM at bfdbe5e: 0.058 against 0.046 ms; buffering the writes did not change it).',
  '- **sync image hop**: the gateway\'s `server-timing` total minus the engine\'s own time, for a 64x64 `local-image`',
  '  (auth, validation, reservation, hand-off to the media service over Redis, settlement, signed URL). "As the client',
  '  sees it" adds the bench client\'s own `fetch`, which runs in the gateway\'s process; its floor is shown beside.',
  '  The floor\'s figure is bench:floor\'s skeleton on this hop, right after the gateway in the same run: a node:http',
  '  gateway that takes the reservation with atelier\'s ledger, adds the call to a Redis stream and answers with a signed',
  '  URL, and a worker that stores a ready-made 64x64 PNG through atelier\'s local blob store and replies; no engine.',
  '- **floor**: bench:chat also runs the chat path\'s topology built from the same libraries with nothing of atelier\'s',
  '  on it but its credit ledger (`tools/bench/floor.mjs`, alone as `npm run bench:floor`): a node:http gateway that',
  '  takes the reservation, adds the call to a Redis stream and relays the reply, and a worker that reads it with',
  '  XREADGROUP and calls the upstream with undici. Six processes share the two cores where the direct path has two,',
  '  so its share of the direct rate is the ceiling for this design built with these libraries on this machine;',
  `  the 30 % target lies ${floorShare < 30 ? 'above' : 'at or below'} it here (${fmt(floorShare, 1)} %). That ceiling moves with the machine, as the direct path`,
  '  and the six processes slow down by different factors: 24.2 % on an Intel Xeon, 31.0 % on a slower AMD EPYC, 24-39 % from',
  '  run to run on a faster one, so on some machines no gateway of this design could meet the 30 % row. The row that holds',
  '  the gateway to account is therefore its rate as a share of the floor\'s in the same run, with a target of at least',
  '  80 % (set before the run that first reported it; the pages before measured 79.6 % and 83.7 %): what atelier\'s own',
  '  work costs, namely auth, validation, token counting, governance checks, metrics, Nest and Fastify, may take at most a',
  '  fifth of the throughput the bare topology reaches. The 30 % row stays, for comparison with earlier pages.',
  `  The 2,500 req/s row is absolute, so it moves with the machine's speed too: the floor reached ${fmt(floorRate, 0)} req/s here${floorRate < 2500 ? ', below it' : ''};`,
  '  on a slow stretch of a 2-vCPU AMD EPYC VM (2026-11-28, four runs at 0574cff) the floor reached 2,310-3,190 req/s',
  '  and the direct path 10,670-13,434, where the page of 7d122d9, on the same kind of VM earlier that day, measured',
  '  7,184 and 30,127 (medians of five).',
  '  At 500 req/s the floor takes the same fixed rate right after the gateway: its added p99 is what the topology\'s',
  '  own tail is on this machine that minute. When the gateway misses the 15 ms row and the floor\'s figure is as high,',
  '  the tail belongs to six processes sharing two cores, not to atelier\'s work (at 3a09364, three runs on a 2-core',
  '  Intel Xeon VM: gateway 13.36 / 8.06 / 7.10 ms, floor 17.35 / 8.25 / 6.70 ms).',
  '  One request at a time, the floor answers the same 400 requests right after the gateway: the one-at-a-time p99 row',
  '  compared with it says how much of that tail is atelier\'s work and how much the wake-ups of six processes.',
  '- **closed loop**: the direct path, the gateway and the floor take turns in each run (three rounds of a third of',
  '  the time, the order rotated), so the ratios between them hold while a shared VM\'s speed drifts during the run.',
  '- **SSE**: resident memory growth of the events app, in a fresh process of its own started as `npm start` and the image start it, with 10,000 idle `GET /api/events` streams of 100 users opened by another process; RSS read from `/proc` before they open and 30 s after (every stream has had a keep-alive).',
  '- **first second** at 500 req/s, and **after 6 s idle**: after a pause, the first request costs more than the ones',
  '  after it. At commit 5625e01 (13-20 ms against 3-4 ms, one at a time after 10 s idle on a slow 2-core VM) the API',
  '  key was read again (a reading is trusted for at most a second) and the reservation ran before the hand-off (the',
  '  reading of spare credits that lets it run beside expired after 5 s). Now a key used in the last 10 minutes is read',
  '  again in the background before its reading expires, and an older reading of spare credits still lets a well-funded',
  '  namespace\'s reservation run beside the hand-off (docs/credits.md): after 6 s idle, the added p50 went from 4.73 to',
  '  2.55 ms (medians of three alternating runs on a 2-core Intel Xeon VM). What remains is the upstream connection opened',
  '  again, and caches are cold. At 500 req/s a backlog forms behind those first requests; on the slow VM, in one traced run,',
  '  requests were slow from the first one on, before any garbage-collection pause, and the backlog took 650 ms to clear.',
  '  On faster machines the first second\'s p99 mostly says whether the gateway\'s first Mark-Compact of the run fell in',
  '  it: the set-up traffic fills the old generation to just under V8\'s limit, and a Mark-Compact then costs the main',
  '  thread 15-37 ms of marking steps and a 6-14 ms pause within 50-90 ms. Three runs traced at commit b068982 (a faster AMD EPYC): a Mark-Compact fell in the first second of each,',
  '  with slow requests up to 59, 44 and 66 ms; after the first second the same runs\' added p99 was 6.4, 8.9 and 5.6 ms.',
  '  On a 2-core Intel Xeon VM (commit after e80649a) it is the services\' first burst since they started, not the pause:',
  '  every stage is about twice as slow in that second (`BENCH_FIRST_SECOND=1`), and 2 s at 500 req/s just before the run',
  '  (`BENCH_WARM=2`) took the first second\'s added p99 from 7-90 ms to 4.7-5.1 ms, and to 3.8-6.9 ms with 10 s idle in',
  '  between; 0.2 s of burst or 2 s at 50 req/s did not (8-34 and 28-49 ms).',
  '  Traced with `--trace-gc` (commit 82aaf2b), the services allocate next to nothing while idle, so the first burst',
  '  runs their first scavenge since set-up, which promotes start-up\'s young objects past the old-generation limit V8',
  '  set a few MB above the boot-time live set: a Mark-Compact follows within 90 ms. Since commit 6e8ddfc every service',
  '  sets `V8_HEAP_GROWING_PERCENT` (default 100: twice the live set) before it starts: in alternating runs the first',
  '  second\'s added p99 went from 12.7-39.5 ms to 4.4-5.6 ms. Forcing a full collection once start-up was done instead',
  '  only moved the Mark-Compacts later into the run (first second 7-8 ms, after it 15-23 ms).',
  '- **CPU and wake-ups per request at 500 req/s**: at a steady rate little is batched, and each process is woken for',
  '  nearly every message, so a request costs several times its closed-loop CPU (on a 2-core VM: 2.6-2.9 ms against',
  '  0.63-0.72 ms). On a VM a wake-up is dear: a bare TCP echo server there spent 0.26 ms of CPU per message at 100',
  '  messages/s and 0.010 ms at 10,000. The fewer wake-ups each request causes, the more of the cores is left; the',
  '  steady-state p99 depends on it, as the machine runs close to full at 500 req/s. Settles wait up to 10 ms for',
  '  company for this reason (one durable commit for several). The wait row is where the tail goes: six processes share',
  '  two cores, a request crosses four of them (and Redis and Postgres), and each woken thread may find both cores taken',
  '  (schedstat\'s run-queue time, summed over every thread of every process; on a 2-core Intel Xeon VM at commit',
  '  5c3b961: 1.36-1.57 ms per request through the gateway against 0.01 ms for the direct path, with the machine 75 % busy).',
  '',
  "**Tracing** (issue 72), measured apart from this table with `BENCH_TRACING=1 BENCH_PHASES=0,3 npm run bench:chat`. The",
  "gateway and the chat service export every span (100 % sampling, OTLP/HTTP protobuf) to a collector stand-in of their own",
  "process, in turn with runs that do not trace. On a 2-core VM at commit 7ebbadd, three pairs:",
  "- Closed-loop chat rate, traced ÷ untraced: 91.5, 91.3 and 78.4 %. The median pair costs 8.7 % (target at most 15 %).",
  "  The medians of the rates are 2,388 traced against 3,045 req/s untraced.",
  "- One at a time, added p50: 1.03 / 2.22 / 1.10 ms traced against 1.33 / 1.35 / 1.66 ms untraced. That is within",
  "  noise (target at most 0.3 ms added).",
  "- No span dropped.",
  "- Each stage was first a child span of its own, and the rate fell to 64-76 % of the untraced one. A request's stages",
  "  are therefore events of its span.",
  "- Off (no endpoint), every would-be span is one boolean check. Against the commit before tracing, one at a time",
  "  added p50 was 1.32 against 1.33 ms, and gateway ÷ floor 80.8 against 81.4 %.",
  "",
  'The bench scripts print more than this table: per-stage means for each hop (auth, validation, reserve, hand-off,',
  'handler, relay, settle), event-loop delay per process, and pathological inputs. `BENCH_PROFILE=gateway|chat npm run',
  'bench:chat` writes a V8 CPU profile of that service into `var/profiles/` and prints where its main thread spent',
  'the measured closed loop (phase 3\'s gateway turns), by package and by function (`tools/bench/cpu-profile-summary.mjs`',
  'prints more lines). With `BENCH_TRACE=<file> BENCH_SERVICE_LOGS=<dir>',
  '`BENCH_SERVICE_FLAGS=--trace-gc`, `node tools/bench/gc-episodes.mjs <file> <dir>` lists the episodes of slow requests',
  'and the garbage-collection pauses of any service that overlapped them. `BENCH_PERF=<file> BENCH_PHASES=3 npm run',
  'bench:chat` records the closed loop with `perf record -a` (`BENCH_PERF_PHASE=1`: the 500 req/s run instead) and',
  'prints each process\'s share of the machine\'s CPU (Postgres and Redis included) and its hottest functions. On a',
  'busy machine prefer it to the V8 profiles for where CPU goes: V8\'s sampler over-counts the functions in which a process is descheduled, chiefly socket writes.',
  '',
];
fs.mkdirSync(path.dirname(OUT), { recursive: true });
fs.writeFileSync(OUT, lines.join('\n'));
console.log(`\nwrote ${path.relative(root, OUT)}`);
