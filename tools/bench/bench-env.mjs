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
    [path.join(root, 'node_modules/@swc/cli/bin/swc.js'), 'apps', 'libs', '-d', 'dist/local', '--config-file', '.swcrc', '--ignore', '**/*.spec.ts', '--ignore', '**/jest.config.cjs', '--quiet'],
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
