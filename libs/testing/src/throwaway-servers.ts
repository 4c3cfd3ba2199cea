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
export async function startThrowawayRedis(extraArgs: string[] = []): Promise<ThrowawayServer> {
  const dir = mkdtempSync(path.join(tmpdir(), 'atelier-redis-'));
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'yes', '--appendfsync', 'always', '--dir', dir, '--logfile', path.join(dir, 'redis.log'), ...extraArgs],
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

/** A private Redis Cluster: its primaries (each a ThrowawayServer, with its own append-only file) and its seed list. */
export interface ThrowawayRedisCluster {
  /** REDIS_CLUSTER_NODES: every primary's host:port. */
  nodes: string;
  primaries: ThrowawayServer[];
  /** The primary that serves `key`'s slot now. */
  primaryOf(key: string): Promise<ThrowawayServer>;
  destroy(): Promise<void>;
}

/**
 * `primaries` redis-servers with `--cluster-enabled yes`, joined by `redis-cli --cluster create`
 * (no replicas), each keeping an append-only file and its nodes.conf in its own directory, so a
 * primary killed and started again comes back with its slots and its data.
 */
export async function startThrowawayRedisCluster(primaries = 3): Promise<ThrowawayRedisCluster> {
  const servers: ThrowawayServer[] = [];
  for (let i = 0; i < primaries; i++) servers.push(await startThrowawayRedis(['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000']));
  const nodes = servers.map((s) => `127.0.0.1:${s.port}`);
  execFileSync('redis-cli', ['--cluster', 'create', ...nodes, '--cluster-replicas', '0', '--cluster-yes'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const info = (port: number) => execFileSync('redis-cli', ['-p', String(port), 'cluster', 'info'], { encoding: 'utf8' });
  await waitFor(() => servers.every((s) => info(s.port).includes('cluster_state:ok')), { timeoutMs: 20_000, description: 'the Redis Cluster to be ok' });
  return {
    nodes: nodes.join(','),
    primaries: servers,
    primaryOf: async (key) => {
      const slot = execFileSync('redis-cli', ['-p', String(servers[0].port), 'cluster', 'keyslot', key], { encoding: 'utf8' }).trim();
      // CLUSTER NODES: `<id> <ip>:<port>@<bus port> <flags> ... <slot ranges>`, one line a node.
      for (const line of execFileSync('redis-cli', ['-p', String(servers[0].port), 'cluster', 'nodes'], { encoding: 'utf8' }).trim().split('\n')) {
        const fields = line.split(' ');
        const port = Number(/:(\d+)@/.exec(fields[1])?.[1]);
        for (const range of fields.slice(8)) {
          const [from, to = from] = range.split('-').map(Number);
          if (from <= Number(slot) && Number(slot) <= to) return servers.find((s) => s.port === port)!;
        }
      }
      throw new Error(`no primary serves slot ${slot}`);
    },
    destroy: async () => {
      await Promise.all(servers.map((s) => s.destroy()));
    },
  };
}
