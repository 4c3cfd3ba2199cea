import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { waitFor } from './wait-for';

/** A port nobody listens on right now (the OS picks it). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** A server a fault test may stop, kill and restart without touching anyone else's. */
export interface ThrowawayServer {
  url: string;
  port: number;
  /** Clean stop (Postgres: fast shutdown, which terminates every session with 57P01). */
  stop(): Promise<void>;
  /** Crash: SIGKILL (Redis) or immediate shutdown (Postgres). */
  kill(): Promise<void>;
  start(): Promise<void>;
  /** Stops it for good and deletes its files. */
  destroy(): Promise<void>;
}

/**
 * Postgres's binaries refuse to run as root; as root they run as the `postgres` user, which
 * Debian's server packages create.
 */
function asPostgresUser(bin: string, args: string[], opts: { cwd?: string } = {}): string {
  const root = process.getuid?.() === 0;
  const [cmd, argv] = root ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
  return execFileSync(cmd, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts });
}

/** Whether this machine can run throwaway servers (the fault suites skip themselves otherwise). */
export function canRunThrowawayServers(): { ok: true } | { ok: false; why: string } {
  try {
    const bindir = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim();
    if (!existsSync(path.join(bindir, 'initdb'))) return { ok: false, why: `no initdb in ${bindir}` };
    execFileSync('redis-server', ['--version'], { encoding: 'utf8' });
    return { ok: true };
  } catch (err) {
    return { ok: false, why: (err as Error).message.split('\n')[0] };
  }
}

/** A private Postgres cluster (initdb in a temp directory, trust auth, fsync off) on a free port. */
export async function startThrowawayPostgres(): Promise<ThrowawayServer> {
  const bindir = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim();
  const dir = mkdtempSync(path.join(tmpdir(), 'atelier-pg-'));
  chmodSync(dir, 0o777);
  const data = path.join(dir, 'data');
  const port = await freePort();
  if (process.getuid?.() === 0) execFileSync('chown', ['postgres', dir]);
  asPostgresUser(path.join(bindir, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const pgCtl = (args: string[]) =>
    asPostgresUser(path.join(bindir, 'pg_ctl'), ['-D', data, '-w', '-t', '60', ...args], { cwd: dir });
  const start = async () => {
    pgCtl([
      '-l',
      path.join(dir, 'server.log'),
      '-o',
      `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200`,
      'start',
    ]);
    await waitFor(() => listening(port), { timeoutMs: 30_000, description: `Postgres on ${port}` });
  };
  await start();
  let destroyed = false;
  return {
    url: `postgresql://postgres@127.0.0.1:${port}/postgres`,
    port,
    start,
    stop: async () => {
      pgCtl(['-m', 'fast', 'stop']);
    },
    kill: async () => {
      pgCtl(['-m', 'immediate', 'stop']);
    },
    destroy: async () => {
      if (destroyed) return;
      destroyed = true;
      try {
        pgCtl(['-m', 'immediate', 'stop']);
      } catch {
        // already stopped
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A private redis-server on a free port. It keeps an append-only file, so a restart keeps the
 * queues the way a production Redis with persistence does.
 */
export async function startThrowawayRedis(): Promise<ThrowawayServer> {
  const dir = mkdtempSync(path.join(tmpdir(), 'atelier-redis-'));
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'yes', '--appendfsync', 'always', '--dir', dir, '--logfile', path.join(dir, 'redis.log')],
      { stdio: 'ignore' },
    );
    await waitFor(() => listening(port), { timeoutMs: 10_000, description: `Redis on ${port}` });
  };
  const end = async (signal: NodeJS.Signals) => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve());
      c.kill(signal);
    });
  };
  await start();
  let destroyed = false;
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    start,
    stop: () => end('SIGTERM'),
    kill: () => end('SIGKILL'),
    destroy: async () => {
      if (destroyed) return;
      destroyed = true;
      await end('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
