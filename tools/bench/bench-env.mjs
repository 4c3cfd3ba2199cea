// Shared set-up for the benchmarks: compiled code (as in production), a fresh database and
// Redis prefix, removed afterwards.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import path from 'node:path';
import pg from 'pg';
import { ensureRuntime, root } from '../bootstrap.mjs';

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

export async function benchDatabase() {
  const server = process.env.TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
  const name = `atelier_bench_${randomBytes(4).toString('hex')}`;
  const url = new URL(server);
  url.pathname = `/${name}`;
  const { deploy } = await import('../db/migrations.mjs');
  await deploy({ databaseUrl: url.toString(), log: () => {} });
  return {
    databaseUrl: url.toString(),
    prefix: `atelier-bench-${name}`,
    drop: async () => {
      const c = new pg.Client({ connectionString: server });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await c.end();
    },
  };
}

export function machine() {
  return `node ${process.version}, ${(globalThis.navigator?.hardwareConcurrency ?? '?')} cpus`;
}

/** The p-th quantile (0..1) of a list of numbers, nearest rank. */
export function percentile(list, p) {
  const sorted = [...list].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length - 1) * p))];
}

/** Production settings on the bench database; `overrides` adds what one benchmark needs. */
export function benchConfig(db, overrides = {}) {
  const { parseConfig } = dist('libs/config/src/index.js');
  return parseConfig({
    DATABASE_URL: db.databaseUrl,
    REDIS_URL: process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
    REDIS_PREFIX: db.prefix,
    ADMIN_TOKEN: 'bench-admin-token-0123456789',
    URL_SIGNING_SECRET: 'bench-url-signing-secret-0123456789',
    LOG_LEVEL: 'error',
    NODE_ENV: 'production',
    ...overrides,
  });
}

/** The compiled gateway listening on a free local port, plus a user with `credits` to spend. */
export async function startBenchGateway(config, credits) {
  const { createService } = dist('libs/runtime/src/index.js');
  const { GatewayModule } = dist('apps/gateway/src/gateway.module.js');
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
 * Histogram sums and counts (and event-loop gauges) in a Prometheus text exposition, keyed
 * "<prefix><metric> <stage, queue or route label>". Two of these around a run give per-stage means.
 */
export function histogramTotals(text, prefix = '', into = new Map()) {
  for (const line of text.split('\n')) {
    const m = /^([a-z0-9_]+)\{([^}]*)\} ([0-9.eE+-]+|NaN)$/.exec(line);
    if (!m || !(/_(sum|count)$/.test(m[1]) || m[1].startsWith('nodejs_eventloop_lag_p'))) continue;
    const labels = Object.fromEntries([...m[2].matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    const key = `${prefix}${m[1]} ${labels.stage ?? labels.queue ?? labels.route ?? ''}`;
    into.set(key, m[1].startsWith('nodejs_eventloop') ? Math.max(into.get(key) ?? 0, Number(m[3])) : (into.get(key) ?? 0) + Number(m[3]));
  }
  return into;
}

/** Mean milliseconds per observation of a histogram between two histogramTotals. */
export function meanMs(before, after, metric, label, prefix = '') {
  const delta = (suffix) => (after.get(`${prefix}${metric}_${suffix} ${label}`) ?? 0) - (before.get(`${prefix}${metric}_${suffix} ${label}`) ?? 0);
  return delta('count') > 0 ? (delta('sum') / delta('count')) * 1000 : NaN;
}

/** "name 0.12  name 0.34 ..." for the given stages of atelier_stage_duration_seconds. */
export function stageLine(before, after, stages, prefix = '') {
  return stages
    .map((s) => {
      const v = meanMs(before, after, 'atelier_stage_duration_seconds', s, prefix);
      return `${s} ${Number.isFinite(v) ? v.toFixed(2) : '-'}`;
    })
    .join('  ');
}
