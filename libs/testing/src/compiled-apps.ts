import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { TestEnvironment } from './test-infrastructure';
import { freePort } from './throwaway-servers';
import { waitFor } from './wait-for';

const root = path.resolve(__dirname, '../../..');

/** The six apps `npm start` runs, each with the variable that sets its port. */
export const SERVICE_APPS: readonly (readonly [name: string, portVar: string])[] = [
  ['gateway', 'PORT'],
  ['chat', 'CHAT_PORT'],
  ['media', 'MEDIA_PORT'],
  ['queue-worker', 'QUEUE_WORKER_PORT'],
  ['events', 'EVENTS_PORT'],
  ['fine-tune', 'FINE_TUNE_PORT'],
];

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
      ...['-d', dist, '--config-file', '.swcrc', '--quiet'],
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
    AUTH_FAILURES_PER_MINUTE: String(env.config.AUTH_FAILURES_PER_MINUTE),
    ...extra,
  };
}

export const repoRoot = root;

export interface AppProcess {
  name: string;
  child: ChildProcess;
  port: number;
  /** The last 20 kB it wrote (stdout and stderr), for failure messages. */
  output: () => string;
  alive: () => boolean;
}

/**
 * Starts one compiled app as a real process of a test environment on a free port and waits
 * until its /health answers 200.
 */
export async function startAppProcess(
  build: { main: (app: string) => string },
  env: TestEnvironment,
  name: string,
  portVar: string,
  extra: Record<string, string> = {},
  /** Called with the child right after it is spawned, before it is healthy (for cleanup on failure). */
  onSpawn?: (child: ChildProcess) => void,
): Promise<AppProcess> {
  // A port given in `extra` is used (a URL that must be known before the app starts, e.g. PUBLIC_URL).
  const port = extra[portVar] ? Number(extra[portVar]) : await freePort();
  const child = spawn(process.execPath, [build.main(name)], {
    cwd: root,
    env: appProcessEnv(env, { ADMIN_TOKEN: env.config.ADMIN_TOKEN ?? '', HOST: '127.0.0.1', [portVar]: String(port), LOG_LEVEL: 'warn', PRETTY_LOGS: 'false', ...extra }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  onSpawn?.(child);
  let out = '';
  const keep = (d: Buffer) => (out = (out + d.toString()).slice(-20_000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const proc: AppProcess = { name, child, port, output: () => out, alive: () => child.exitCode === null && child.signalCode === null };
  await waitFor(
    async () => {
      if (!proc.alive()) throw new Error(`${name} exited early:\n${out}`);
      return (await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined))?.ok;
    },
    { timeoutMs: 30_000, description: `${name} to be healthy` },
  );
  return proc;
}

/** Resident memory of a process (an app started by startAppProcess), read from outside it, in bytes. */
export function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}
