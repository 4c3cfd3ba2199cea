import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { TestEnvironment } from './test-infrastructure';

const root = path.resolve(__dirname, '../../..');

/**
 * Compiles apps the way production does (SWC, CommonJS) so tests can run them as real
 * processes (kill -9, SIGTERM). The output sits inside the repo so node_modules resolve.
 */
export function buildAppsForTest(apps: string[]): { dist: string; main: (app: string) => string; cleanup: () => void } {
  mkdirSync(path.join(root, 'dist'), { recursive: true });
  const dist = mkdtempSync(path.join(root, 'dist', 'test-apps-'));
  const build = spawnSync(
    process.execPath,
    [
      path.join(root, 'node_modules/@swc/cli/bin/swc.js'),
      ...apps.map((a) => `apps/${a}/src`),
      'libs',
      ...['-d', dist, '--config-file', '.swcrc', '--ignore', '**/*.spec.ts', '--quiet'],
    ],
    { cwd: root, encoding: 'utf8' },
  );
  if (build.status !== 0) throw new Error(`building ${apps.join(', ')} failed: ${build.stderr}`);
  return {
    dist,
    main: (app) => path.join(dist, `apps/${app}/src/main.js`),
    cleanup: () => rmSync(dist, { recursive: true, force: true }),
  };
}

/** The environment a spawned app needs to join a test environment (same DB, Redis prefix, storage). */
export function appProcessEnv(env: TestEnvironment, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    DATABASE_URL: env.databaseUrl,
    REDIS_URL: env.redisUrl,
    REDIS_PREFIX: env.prefix,
    STORAGE_DIR: env.config.STORAGE_DIR,
    ...extra,
  };
}

export const repoRoot = root;
