// Shared set-up for the benchmarks: compiled code (as in production), a fresh database and
// Redis prefix, removed afterwards (and, for a run killed before it could remove them, by the
// next bench on the same machine).
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { ensureRuntime, root } from '../bootstrap.mjs';
import { alive, ownerGone } from './pids.mjs';

ensureRuntime();
export const require = createRequire(import.meta.url);

export function buildAll() {
  const r = spawnSync(
    process.execPath,
    [path.join(root, 'node_modules/@swc/cli/bin/swc.js'), 'apps', 'libs', '-d', 'dist/local', '--config-file', '.swcrc', '--quiet'],
    { cwd: root, stdio: 'inherit' },
  );
  if (r.status !== 0) process.exit(1);
}

export const dist = (p) => require(path.join(root, 'dist/local', p));

/**
 * Node arguments for every process a bench starts (before its own): it ends when the bench does,
 * even a SIGKILLed one (die-with-bench.cjs). The process needs the link: an IPC channel, or
 * `'pipe'` as its fd 3 (`stdio: [..., ..., ..., 'pipe']`).
 */
export const dieWithBench = ['--require', path.join(root, 'tools/bench/die-with-bench.cjs')];

/** The Postgres server the benches use (TEST_DATABASE_URL, as the tests), without a database of atelier's. */
export const benchPostgresUrl = process.env.TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
export const benchRedisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/**
 * A run's database is `atelier_bench_<machine>_<pid>_<random>` and its Redis keys start with
 * `atelier-bench-<that name>`: the machine (a hash of its host name) and the bench's own pid say
 * whose it is, so a run killed before its drop() (SIGKILL, the OOM killer, a closed terminal) can
 * be told from one still running. The Postgres and Redis may be shared by several machines: only
 * this machine's runs are ever judged, by whether their pid is still alive here.
 */
const MACHINE_TAG = createHash('sha256').update(os.hostname()).digest('hex').slice(0, 6);
const RUN = 'atelier_bench_([0-9a-f]{6})_(\\d+)_[0-9a-f]{8}';
const RUN_NAME = new RegExp(`^${RUN}$`);
const runPrefix = (name) => `atelier-bench-${name}`;
const RUN_OF_KEY = new RegExp(`^${runPrefix(`(${RUN})`)}`);

/** This machine's run whose bench process is gone (this process is alive, so never its own). */
const staleRun = (name) => {
  const m = RUN_NAME.exec(name);
  return m !== null && m[1] === MACHINE_TAG && !alive(Number(m[2]));
};

async function withRedis(work) {
  const { Redis } = require('ioredis');
  const redis = new Redis(benchRedisUrl, { lazyConnect: true });
  await redis.connect();
  try {
    return await work(redis);
  } finally {
    await redis.quit();
  }
}

async function scanKeys(redis, pattern, each) {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    if (keys.length) await each(keys);
    cursor = next;
  } while (cursor !== '0');
}

/**
 * Removes what this machine's dead bench runs left: their databases and their Redis keys (the
 * keys also when the database went first). The processes a bench starts end with it
 * (dieWithBench); a database that still has sessions anyway (processes someone started on it by
 * hand) is kept, and named, rather than dropped under processes that would reconnect in a loop.
 */
export async function sweepStaleBenchRuns() {
  const removed = [];
  const kept = [];
  const admin = new pg.Client({ connectionString: benchPostgresUrl });
  await admin.connect();
  try {
    const { rows } = await admin.query(`SELECT datname AS name FROM pg_database WHERE datname LIKE 'atelier\\_bench\\_%'`);
    for (const { name } of rows) {
      if (!staleRun(name)) continue;
      try {
        await admin.query(`DROP DATABASE IF EXISTS "${name}"`);
        removed.push(name);
      } catch (err) {
        // 55006: still in use (without FORCE, a database with sessions is refused).
        if (err.code !== '55006') throw err;
        kept.push(name);
      }
    }
  } finally {
    await admin.end();
  }
  // Judged once per run, not per key: a run can leave tens of thousands.
  const verdicts = new Map(kept.map((name) => [name, false]));
  const keysLeft = new Set();
  await withRedis((redis) =>
    scanKeys(redis, `${runPrefix(`atelier_bench_${MACHINE_TAG}_`)}*`, async (keys) => {
      const stale = keys.filter((key) => {
        const name = RUN_OF_KEY.exec(key)?.[1];
        if (name === undefined) return false;
        if (!verdicts.has(name)) verdicts.set(name, staleRun(name));
        if (verdicts.get(name)) keysLeft.add(name);
        return verdicts.get(name);
      });
      if (stale.length) await redis.unlink(...stale);
    }),
  );
  for (const name of keysLeft) if (!removed.includes(name)) removed.push(`${name} (its Redis keys; the database was gone)`);
  return { removed, kept };
}

const TEMP_PREFIX = 'atelier-bench-tmp-';

/**
 * A scratch directory of this run (`atelier-bench-tmp-<pid>-<label>-<random>` in the OS's temp
 * directory), removed when the process exits, however it exits short of SIGKILL; a SIGKILLed
 * run's are removed by the next bench that asks for one, once the pid is gone.
 */
export function benchTempDir(label) {
  for (const entry of fs.readdirSync(os.tmpdir())) if (ownerGone(entry, TEMP_PREFIX)) fs.rmSync(path.join(os.tmpdir(), entry), { recursive: true, force: true });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${TEMP_PREFIX}${process.pid}-${label}-`));
  process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export async function benchDatabase() {
  const { removed, kept } = await sweepStaleBenchRuns();
  if (removed.length) console.error(`removed what killed bench runs left: ${removed.join(', ')}`);
  if (kept.length) console.error(`kept, still in use (a killed run's, with sessions open on it): ${kept.join(', ')}`);
  const name = `atelier_bench_${MACHINE_TAG}_${process.pid}_${randomBytes(4).toString('hex')}`;
  const url = new URL(benchPostgresUrl);
  url.pathname = `/${name}`;
  const { deploy } = await import('../db/migrations.mjs');
  await deploy({ databaseUrl: url.toString(), log: () => {} });
  return {
    databaseUrl: url.toString(),
    prefix: runPrefix(name),
    drop: async () => {
      const c = new pg.Client({ connectionString: benchPostgresUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await c.end();
      // The run's Redis keys too (queues, kept jobs, streams, kept replies; the floor's skeleton
      // uses `<prefix>-floor`): the machine's Redis is shared and keeps them until it restarts.
      // One bench:report left about 60,000 before this.
      await withRedis((redis) => scanKeys(redis, `${runPrefix(name)}*`, (keys) => redis.unlink(...keys)));
    },
  };
}

export function machine() {
  return `node ${process.version}, ${(globalThis.navigator?.hardwareConcurrency ?? '?')} cpus`;
}

/** Extra node flags for the measured services (BENCH_SERVICE_FLAGS, space-separated), e.g. V8 heap settings or GC traces. */
export const serviceFlags = () => (process.env.BENCH_SERVICE_FLAGS ?? '').split(' ').filter(Boolean);

/**
 * V8's old-generation headroom as a service sets it (V8_HEAP_GROWING_PERCENT from the same
 * environment, else its default), for the processes the benches start that are not services
 * (bench:floor's skeleton), so they are compared with the services like for like.
 */
export function applyServiceHeapGrowth() {
  const { parseConfig } = dist('libs/config/src/index.js');
  const { applyHeapGrowth } = dist('libs/runtime/src/index.js');
  applyHeapGrowth(parseConfig({ V8_HEAP_GROWING_PERCENT: process.env.V8_HEAP_GROWING_PERCENT }));
}

/** A TCP port free on 127.0.0.1 right now. */
export function freePort() {
  return new Promise((resolve) => {
    const s = http.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/**
 * Closed loop: `connections` clients, each calling `send()` again as soon as its previous call
 * settled, until `seconds` have passed. A rejected call counts as an error and the loop goes on.
 * Resolves with the calls answered, the errors (and the last one's message), the rate of answered
 * calls, and each answered call's duration in ms.
 */
export async function closedLoop(send, connections, seconds) {
  let ok = 0;
  let errors = 0;
  let lastError;
  const latencies = [];
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (performance.now() < deadline) {
        const sent = performance.now();
        try {
          await send();
          latencies.push(performance.now() - sent);
          ok++;
        } catch (err) {
          errors++;
          lastError = err.message;
        }
      }
    }),
  );
  return { ok, errors, lastError, rps: ok / ((performance.now() - started) / 1000), latencies };
}

/** The p-th quantile (0..1) of a list of numbers, nearest rank. */
export function percentile(list, p) {
  const sorted = [...list].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length - 1) * p))];
}

/** Random per bench run (production refuses published values), the same for every process of the run. */
const BENCH_ADMIN_TOKEN = randomBytes(32).toString('hex');
const BENCH_URL_SIGNING_SECRET = randomBytes(32).toString('hex');
/** Production serves /metrics only with a token (or on METRICS_PORT): every bench process gets this one. */
export const BENCH_METRICS_TOKEN = randomBytes(32).toString('hex');
export const metricsHeaders = { authorization: `Bearer ${BENCH_METRICS_TOKEN}` };

/** Production settings on the bench database; `overrides` adds what one benchmark needs. */
export function benchConfig(db, overrides = {}) {
  const { parseConfig } = dist('libs/config/src/index.js');
  return parseConfig({
    DATABASE_URL: db.databaseUrl,
    REDIS_URL: benchRedisUrl,
    REDIS_PREFIX: db.prefix,
    ADMIN_TOKEN: BENCH_ADMIN_TOKEN,
    URL_SIGNING_SECRET: BENCH_URL_SIGNING_SECRET,
    METRICS_TOKEN: BENCH_METRICS_TOKEN,
    LOG_LEVEL: 'error',
    NODE_ENV: 'production',
    // As the services read it, so an experiment with the setting reaches the in-process gateway too.
    V8_HEAP_GROWING_PERCENT: process.env.V8_HEAP_GROWING_PERCENT,
    ...overrides,
  });
}

/** The compiled gateway listening on a free local port, plus a user with `credits` to spend. */
export async function startBenchGateway(config, credits) {
  const { applyHeapGrowth, createService } = dist('libs/runtime/src/index.js');
  const { GatewayModule } = dist('apps/gateway/src/gateway.module.js');
  applyHeapGrowth(config);
  const app = await createService(GatewayModule.forRoot(config), config, { service: 'gateway' });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const base = await app.getUrl();
  const res = await fetch(`${base}/api/admin/users`, {
    method: 'POST',
    headers: { authorization: `Bearer ${config.ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ username: 'bench', credits }),
  });
  if (res.status !== 201) throw new Error(`creating the bench user failed: ${res.status} ${await res.text()}`);
  return { app, base, user: await res.json() };
}

/**
 * The fine-tune service in the same process as a bench gateway: creating a fine-tune asks it to
 * read the dataset (fine-tune-inspect).
 */
export async function startBenchFineTune(config) {
  const { createService } = dist('libs/runtime/src/index.js');
  const { FineTuneServiceModule } = dist('libs/fine-tune/src/index.js');
  return createService(FineTuneServiceModule.forRoot(config), config, { service: 'fine-tune' });
}

/**
 * Histogram sums and counts (and event-loop gauges) in a Prometheus text exposition, keyed
 * "<prefix><metric> <stage, queue or route label>". Two of these around a run give per-stage means.
 */
export function histogramTotals(text, prefix = '', into = new Map()) {
  for (const line of text.split('\n')) {
    const m = /^([a-z0-9_]+)\{([^}]*)\} ([0-9.eE+-]+|NaN)$/.exec(line);
    if (!m || !(/_(sum|count|bucket)$/.test(m[1]) || m[1].startsWith('nodejs_eventloop_lag_p'))) continue;
    const labels = Object.fromEntries([...m[2].matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    const key = `${prefix}${m[1]} ${labels.stage ?? labels.queue ?? labels.route ?? labels.kind ?? ''}${labels.le ? ` ${labels.le}` : ''}`;
    into.set(key, m[1].startsWith('nodejs_eventloop') ? Math.max(into.get(key) ?? 0, Number(m[3])) : (into.get(key) ?? 0) + Number(m[3]));
  }
  return into;
}

/** How much one histogramTotals entry (a sum or a count) grew between two scrapes. */
export const growth = (before, after, key) => (after.get(key) ?? 0) - (before.get(key) ?? 0);

/** Mean milliseconds per observation of a histogram between two histogramTotals. */
export function meanMs(before, after, metric, label, prefix = '') {
  const delta = (suffix) => growth(before, after, `${prefix}${metric}_${suffix} ${label}`);
  return delta('count') > 0 ? (delta('sum') / delta('count')) * 1000 : NaN;
}

/**
 * The p-th quantile (0..1) of a histogram between two histogramTotals, as the upper bound of the
 * bucket it falls in (ms): "99 % of this stage took at most this long".
 */
export function quantileMs(before, after, metric, label, p, prefix = '') {
  const head = `${prefix}${metric}_bucket ${label} `;
  const buckets = [...after.keys()]
    .filter((k) => k.startsWith(head))
    .map((k) => ({ le: k.slice(head.length), n: after.get(k) - (before.get(k) ?? 0) }))
    .sort((a, b) => Number(a.le === '+Inf' ? Infinity : a.le) - Number(b.le === '+Inf' ? Infinity : b.le));
  const total = buckets.at(-1)?.n ?? 0;
  if (!total) return NaN;
  const hit = buckets.find((b) => b.n >= p * total);
  return hit.le === '+Inf' ? Infinity : Number(hit.le) * 1000;
}

/** "name 0.12  name 0.34 ..." for the given stages of atelier_stage_duration_seconds. */
export function stageLine(before, after, stages, prefix = '') {
  const f2 = fixed(2);
  return stages.map((s) => `${s} ${f2(meanMs(before, after, 'atelier_stage_duration_seconds', s, prefix))}`).join('  ');
}

/** A figure in ms to `digits` places, or '-' when there was nothing to average. */
export const fixed = (digits) => (v) => (Number.isFinite(v) ? v.toFixed(digits) : '-');

/** histogramTotals of the service listening on `port`, read from its /metrics. */
export async function scrapeHistograms(port, prefix = '', into = new Map()) {
  return histogramTotals(await (await fetch(`http://127.0.0.1:${port}/metrics`, { headers: metricsHeaders })).text(), prefix, into);
}

/**
 * CPU seconds used so far by each named group of processes, `{ all, system, wakeups, runWait }`
 * (user + system, the kernel's part, how often its threads slept and were woken, and the seconds
 * they waited for a CPU once woken), read from /proc
 * (Linux only; elsewhere every group reads 0). `groups` maps a name to pids (Node processes the bench started) or to a command name (`postgres`,
 * `redis-server`: every process of it, so Postgres backends count too). Two snapshots'
 * difference over the requests answered between them is what one request costs each process:
 * on a co-located machine throughput is bounded by the sum, so this is where a closed loop's
 * requests per second go.
 */
export function cpuSeconds(groups) {
  /** Clock ticks of one process (USER_HZ, 100 on Linux). */
  const read = (pid) => {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      // Fields after the command (which may hold spaces) start after the last ')'.
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // With its exited children's (cutime, cstime): a Postgres backend that exits between two
      // snapshots moves its CPU into the postmaster's, rather than taking it out of the sum.
      return {
        comm: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')),
        all: Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]),
        system: Number(f[12]) + Number(f[14]),
      };
    } catch {
      return undefined;
    }
  };
  /**
   * Over the process's threads: how often they went to sleep and were woken (voluntary context
   * switches), and how long, woken, they waited for a CPU (schedstat's run-queue time, seconds).
   * Each wake-up is a trip through the scheduler, and in a VM often a halted vCPU woken by the
   * hypervisor: at a steady rate, where little is batched, these rather than the work itself set
   * the CPU per request. The wait is where a steady rate's tail latency goes when processes
   * outnumber cores: a request crosses several processes, and each may find both cores taken.
   */
  const threads = (pid) => {
    let wakeups = 0;
    let runWait = 0;
    let tids = [];
    try {
      tids = fs.readdirSync(`/proc/${pid}/task`);
    } catch {
      // the process ended
    }
    for (const tid of tids) {
      try {
        wakeups += Number(/^voluntary_ctxt_switches:\s*(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8'))?.[1] ?? 0);
        // Absent without CONFIG_SCHEDSTATS; the wait then reads 0.
        runWait += Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[1] ?? 0) / 1e9;
      } catch {
        // the thread ended
      }
    }
    return { wakeups, runWait };
  };
  /**
   * The kernel's count of the process's read, readv, write and writev calls (and their p- forms):
   * how Node (libuv) and Redis use their sockets. On loopback a socket write runs the receiver's
   * side of TCP and wakes it, so how many a request takes is a cost of its own. Postgres's
   * backends use send and recv on theirs, which this does not count: its figure is its file I/O (WAL).
   */
  const io = (pid) => {
    try {
      const text = fs.readFileSync(`/proc/${pid}/io`, 'utf8');
      return { reads: Number(/^syscr:\s*(\d+)/m.exec(text)?.[1] ?? 0), writes: Number(/^syscw:\s*(\d+)/m.exec(text)?.[1] ?? 0) };
    } catch {
      // the process ended, or another user's
      return { reads: 0, writes: 0 };
    }
  };
  /** A process that counts towards a group: its ticks and, read only now, its threads' and I/O figures (every /proc entry is read to match a command). */
  const counted = (pid, s) => s && { ...s, ...threads(pid), ...io(pid) };
  const add = (into, s) => ({
    all: into.all + (s?.all ?? 0),
    system: into.system + (s?.system ?? 0),
    wakeups: into.wakeups + (s?.wakeups ?? 0),
    runWait: into.runWait + (s?.runWait ?? 0),
    reads: into.reads + (s?.reads ?? 0),
    writes: into.writes + (s?.writes ?? 0),
  });
  const zero = { all: 0, system: 0, wakeups: 0, runWait: 0, reads: 0, writes: 0 };
  const byComm = new Map();
  const wanted = new Set(Object.values(groups).filter((g) => typeof g === 'string'));
  if (wanted.size) {
    let pids = [];
    try {
      pids = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p));
    } catch {
      // not Linux
    }
    for (const pid of pids) {
      const s = read(pid);
      if (s && wanted.has(s.comm)) byComm.set(s.comm, add(byComm.get(s.comm) ?? zero, counted(pid, s)));
    }
  }
  const out = {};
  for (const [name, g] of Object.entries(groups)) {
    const ticks = typeof g === 'string' ? (byComm.get(g) ?? zero) : g.reduce((sum, pid) => add(sum, counted(pid, read(pid))), zero);
    out[name] = { all: ticks.all / 100, system: ticks.system / 100, wakeups: ticks.wakeups, runWait: ticks.runWait, reads: ticks.reads, writes: ticks.writes };
  }
  return out;
}

/**
 * The machine's CPU time so far as the kernel counts it, in clock ticks over every vCPU (the
 * first line of /proc/stat, or `stat` given as that file's text): `total`, and `steal`, the time a
 * vCPU had work to run while the hypervisor ran something else (another guest on the host). A
 * stolen stretch stalls whatever was on that vCPU, so it lands in a run's tail latencies and
 * lowers its rate, on atelier's path and the floor's alike: printed beside each measured run so
 * that a noisy run can be told from a slow path. Elsewhere than Linux both read 0, and so does
 * `steal` under a hypervisor that does not report it to its guests (bare metal reads 0 too).
 */
export function hostCpuTicks(stat) {
  let text = stat;
  if (text === undefined) {
    try {
      text = fs.readFileSync('/proc/stat', 'utf8');
    } catch {
      return { total: 0, steal: 0 };
    }
  }
  const line = /^cpu\s+(.*)$/m.exec(text);
  if (!line) return { total: 0, steal: 0 };
  // user nice system idle iowait irq softirq steal; guest time is already counted in user and nice.
  const f = line[1].trim().split(/\s+/).map(Number);
  return { total: f.slice(0, 8).reduce((sum, v) => sum + (v || 0), 0), steal: f[7] || 0 };
}

/** The share of the machine's CPU time the hypervisor took between two hostCpuTicks readings, in %. */
export function stealPercent(before, after) {
  const total = after.total - before.total;
  return total > 0 ? (100 * (after.steal - before.steal)) / total : 0;
}

/**
 * One line: CPU milliseconds per request of each group (and the kernel's part) between two
 * cpuSeconds() snapshots; wakeupLine and wakeupTotal: its threads' wake-ups per request;
 * runWaitLine and runWaitTotal: the milliseconds its threads waited for a CPU per request;
 * syscallLine: its read and write system calls per request (not send/recv: see cpuSeconds).
 */
export function cpuPerRequest(before, after, requests) {
  /** How much of `part` (a count, or seconds) group k spent per request between the snapshots. */
  const each = (k, part) => (after[k][part] - before[k][part]) / requests;
  const per = (k, part) => each(k, part) * 1000;
  const parts = Object.keys(after).map((k) => [k, per(k, 'all')]);
  const total = parts.reduce((s, [, v]) => s + v, 0);
  // On loopback, the kernel's part is mostly the sockets' send and receive paths.
  const kernel = Object.keys(after).reduce((s, k) => s + per(k, 'system'), 0);
  const wakeups = Object.keys(after).map((k) => [k, each(k, 'wakeups')]);
  const waits = Object.keys(after).map((k) => [k, per(k, 'runWait')]);
  const runWaitTotal = waits.reduce((sum, [, ms]) => sum + ms, 0);
  return {
    total,
    parts,
    wakeups,
    wakeupTotal: wakeups.reduce((sum, [, n]) => sum + n, 0),
    line: `${parts.map(([k, v]) => `${k} ${v.toFixed(3)} (sys ${per(k, 'system').toFixed(3)})`).join('  ')}  = ${total.toFixed(3)} ms CPU per request, ${kernel.toFixed(3)} of it in the kernel`,
    wakeupLine: wakeups.map(([k, n]) => `${k} ${n.toFixed(1)}`).join('  '),
    runWaitTotal,
    runWaitLine: `${waits.map(([k, ms]) => `${k} ${ms.toFixed(3)}`).join('  ')}  = ${runWaitTotal.toFixed(3)} ms per request`,
    syscallLine: Object.keys(after)
      .map((k) => `${k} ${each(k, 'reads').toFixed(1)}/${each(k, 'writes').toFixed(1)}`)
      .join('  '),
  };
}

/** A cpuSeconds reading of the same groups with every figure 0: a sum's start, and the "before" of one. */
const zeroOf = (reading) => Object.fromEntries(Object.entries(reading).map(([group, figures]) => [group, Object.fromEntries(Object.keys(figures).map((f) => [f, 0]))]));

/**
 * Closed loops that take turns: `rounds` rounds in which each entry of `loops` (by name:
 * `send()` for one call, `groups` for cpuSeconds) runs for `seconds / rounds`, the order rotated
 * each round. On a shared VM the machine's speed drifts over a run's minute, and what a bench
 * reports is a ratio of these rates, so each one is measured across the same stretch of time.
 * `around(name)`, if given, runs before each turn and returns what runs after it (the turn's own
 * statistics; also where to let the turn's after-effects settle before the next one). Resolves
 * with each loop's totals over its turns, as `closedLoop` gives them, its CPU per request and
 * the share of the machine's CPU time the hypervisor took during its turns (`steal`, %).
 */
export async function closedLoopsInTurns(loops, { connections, seconds, rounds, around }) {
  const names = Object.keys(loops);
  const totals = Object.fromEntries(names.map((n) => [n, { ok: 0, errors: 0, lastError: undefined, ms: 0, latencies: [], cpu: undefined, host: { total: 0, steal: 0 } }]));
  for (let round = 0; round < rounds; round++) {
    const shift = round % names.length;
    for (const name of [...names.slice(shift), ...names.slice(0, shift)]) {
      const { send, groups } = loops[name];
      const t = totals[name];
      const after = await around?.(name);
      const cpu0 = cpuSeconds(groups);
      const host0 = hostCpuTicks();
      const started = performance.now();
      const r = await closedLoop(send, connections, seconds / rounds);
      t.ms += performance.now() - started;
      const host1 = hostCpuTicks();
      const cpu1 = cpuSeconds(groups);
      t.host.total += host1.total - host0.total;
      t.host.steal += host1.steal - host0.steal;
      t.cpu ??= zeroOf(cpu0);
      for (const [k, v] of Object.entries(t.cpu)) for (const f of Object.keys(v)) v[f] += cpu1[k][f] - cpu0[k][f];
      t.ok += r.ok;
      t.errors += r.errors;
      t.lastError = r.lastError ?? t.lastError;
      // Not push(...r.latencies): a 10 s loop answers more calls than a call may have arguments.
      for (const l of r.latencies) t.latencies.push(l);
      await after?.();
    }
  }
  return Object.fromEntries(
    names.map((n) => {
      const { ms, cpu, host, ...t } = totals[n];
      return [n, { ...t, rps: t.ok / (ms / 1000), cpu: cpuPerRequest(zeroOf(cpu), cpu, t.ok), steal: stealPercent({ total: 0, steal: 0 }, host) }];
    }),
  );
}

/**
 * Spawns `command argv` (node, or node inside a wrapper: a memory cgroup, callgrind) from the
 * repository root. `ready` resolves with the child once `probe()` answers true, or rejects with the
 * child's last output if it exits first. The child is returned at once, so a bench can track it
 * (its pid, its logs, stopping it) while it starts.
 */
export function spawnUntilReady(name, command, argv, env, probe) {
  const child = spawn(command, argv, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out = (out + d).slice(-4000)));
  child.stderr.on('data', (d) => (out = (out + d).slice(-4000)));
  const ready = new Promise((resolve, reject) => {
    const onExit = (code) => reject(new Error(`${name} exited with ${code}:\n${out}`));
    child.once('exit', onExit);
    const poll = async () => {
      if (await probe().catch(() => false)) {
        child.off('exit', onExit);
        return resolve(child);
      }
      setTimeout(poll, 100);
    };
    void poll();
  });
  return { child, ready };
}

/**
 * The fake OpenAI-compatible upstream (libs/testing) in a process of its own, started with the
 * bench's `startNode(name, args, env, probe)`; resolves with its /v1 URL.
 */
export async function startFakeUpstream(startNode, apiKey) {
  const port = await freePort();
  await startNode(
    'fake upstream',
    // Test-only code is not compiled into dist; Node 24 runs this dependency-free file as it is.
    ['-e', `require(${JSON.stringify(path.join(root, 'libs/testing/src/fake-openai-upstream.ts'))}).startFakeOpenAiUpstream({ apiKey: ${JSON.stringify(apiKey)}, port: ${port}, record: false })`],
    {},
    async () => (await fetch(`http://127.0.0.1:${port}/v1/models`)).status === 404,
  );
  return `http://127.0.0.1:${port}/v1`;
}

/** A temporary copy of the model catalog with `bench-remote`: a chat model the fake upstream serves as `upstreamModel`. */
export function benchCatalog({ upstreamUrl, upstreamModel, apiKeyEnv, description }) {
  const dir = benchTempDir('catalog');
  for (const f of fs.readdirSync(path.join(root, 'libs/models/catalog'))) fs.copyFileSync(path.join(root, 'libs/models/catalog', f), path.join(dir, f));
  fs.writeFileSync(
    path.join(dir, 'bench-remote.json'),
    JSON.stringify({
      id: 'bench-remote',
      created: 1767225600,
      owned_by: 'bench',
      display_name: 'Bench remote',
      description,
      endpoint: '/chat/completions',
      capabilities: { input: ['text'], output: ['text'] },
      pricing: { method: 'token', input_cost_per_token: '0.000001', output_cost_per_token: '0.000002' },
      context_window: 8192,
      default_max_tokens: 256,
      features: { tools: true, json_mode: true, streaming: true },
      engine: { type: 'openai-compatible', base_url: upstreamUrl, upstream_model: upstreamModel, api_key_env: apiKeyEnv },
      parameters: { type: 'object', properties: {} },
    }),
  );
  return dir;
}
