import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { pathToFileURL } from 'node:url';

type Loop = { send: () => Promise<unknown>; groups: Record<string, number[]> };
type Totals = { ok: number; errors: number; lastError?: string; rps: number; latencies: number[]; cpu: { parts: [string, number][]; total: number } };
type BenchEnv = {
  benchPostgresUrl: string;
  benchRedisUrl: string;
  benchDatabase(): Promise<{ databaseUrl: string; prefix: string; drop(): Promise<void> }>;
  sweepStaleBenchRuns(): Promise<{ removed: string[]; kept: string[] }>;
  benchTempDir(label: string): string;
  closedLoopsInTurns(
    loops: Record<string, Loop>,
    opts: { connections: number; seconds: number; rounds: number; around?: (name: string) => Promise<(() => unknown) | undefined> },
  ): Promise<Record<string, Totals>>;
};

let env: BenchEnv;
beforeAll(async () => {
  env = (await import(pathToFileURL(path.join(__dirname, 'bench-env.mjs')).href)) as BenchEnv;
});

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('closed loops that take turns', () => {
  it('rotates the order each round, runs each turn between its hooks, and sums every turn into its loop', async () => {
    const log: string[] = [];
    const answered: Record<string, number> = { direct: 0, gateway: 0, floor: 0 };
    let running: string | undefined;
    const loop = (name: string, fail = false): Loop => ({
      groups: { client: [process.pid] },
      send: async () => {
        // Turns never overlap: no call of another loop is made while this one runs.
        expect(running).toBe(name);
        await pause(1);
        if (fail && (answered[name] + 1) % 3 === 0) {
          answered[name]++;
          throw new Error(`${name} refused`);
        }
        answered[name]++;
      },
    });
    const result = await env.closedLoopsInTurns(
      { direct: loop('direct'), gateway: loop('gateway', true), floor: loop('floor') },
      {
        connections: 2,
        seconds: 0.3,
        rounds: 3,
        around: async (name) => {
          log.push(`start ${name}`);
          running = name;
          return () => {
            running = undefined;
            log.push(`end ${name}`);
          };
        },
      },
    );

    const order = ['direct', 'gateway', 'floor', 'gateway', 'floor', 'direct', 'floor', 'direct', 'gateway'];
    expect(log).toEqual(order.flatMap((n) => [`start ${n}`, `end ${n}`]));
    for (const name of ['direct', 'gateway', 'floor']) {
      const r = result[name];
      // Every call made is counted once, as an answer or as an error, and has a latency if answered.
      expect(r.ok + r.errors).toBe(answered[name]);
      expect(r.latencies).toHaveLength(r.ok);
      expect(r.ok).toBeGreaterThan(0);
      // The rate is over the loop's own turns (3 x 0.1 s), not over the whole run (0.9 s and more).
      expect(r.rps).toBeGreaterThan(r.ok / 0.8);
      expect(r.rps).toBeLessThanOrEqual(r.ok / 0.3);
      expect(r.cpu.parts.map(([group]) => group)).toEqual(['client']);
      expect(Number.isFinite(r.cpu.total)).toBe(true);
    }
    expect(result.gateway.errors).toBeGreaterThan(0);
    expect(result.gateway.lastError).toBe('gateway refused');
    expect(result.direct.errors).toBe(0);
  });
});

describe("a bench's database and Redis prefix", () => {
  it('are both removed by drop(), and nothing of another run with them', async () => {
    const db = await env.benchDatabase();
    const other = `${db.prefix.slice(0, -1)}${db.prefix.endsWith('0') ? '1' : '0'}`;
    const redis = new Redis(env.benchRedisUrl);
    const admin = new pg.Client({ connectionString: env.benchPostgresUrl });
    await admin.connect();
    try {
      // As the services and the floor's skeleton leave them: many keys, some of them streams.
      const keys = Array.from({ length: 2500 }, (_, i) => `${db.prefix}:bull:q:${i}`);
      for (let i = 0; i < keys.length; i += 500) await redis.mset(...keys.slice(i, i + 500).flatMap((k) => [k, 'x']));
      await redis.xadd(`${db.prefix}-floor:calls`, '*', 'job', '1');
      await redis.set(`${other}:kept`, 'x');
      const name = new URL(db.databaseUrl).pathname.slice(1);
      const exists = async () => (await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount;
      expect(await exists()).toBe(1);

      await db.drop();

      expect(await exists()).toBe(0);
      const left: string[] = [];
      let cursor = '0';
      do {
        const [next, found] = await redis.scan(cursor, 'MATCH', `${db.prefix}*`, 'COUNT', 1000);
        left.push(...found);
        cursor = next;
      } while (cursor !== '0');
      expect(left).toEqual([]);
      expect(await redis.get(`${other}:kept`)).toBe('x');
    } finally {
      await redis.del(`${other}:kept`);
      redis.disconnect();
      await admin.end();
    }
  });
});

describe('what a killed bench run left', () => {
  it("is removed by the next bench on the same machine: databases and Redis keys of dead runs, and only those", async () => {
    const db = await env.benchDatabase();
    const [, tag] = /^atelier_bench_([0-9a-f]{6})_(\d+)_[0-9a-f]{8}$/.exec(new URL(db.databaseUrl).pathname.slice(1)) ?? [];
    expect(tag).toBeDefined();
    // A pid that was a process of this machine and is gone, as a SIGKILLed bench's is.
    const deadPid = spawnSync(process.execPath, ['-e', '']).pid;
    const run = (pid: number, suffix: string, machine = tag) => `atelier_bench_${machine}_${pid}_0000000${suffix}`;
    const stale = run(deadPid, 'a');
    const busy = run(deadPid, 'b');
    const live = run(process.ppid, 'c');
    const elsewhere = run(deadPid, 'd', tag === 'ffffff' ? '000000' : 'ffffff');
    const keysOnly = run(deadPid, 'e');
    const databases = [stale, busy, live, elsewhere];
    const admin = new pg.Client({ connectionString: env.benchPostgresUrl });
    const redis = new Redis(env.benchRedisUrl);
    await admin.connect();
    let holder: pg.Client | undefined;
    try {
      for (const name of databases) await admin.query(`CREATE DATABASE "${name}"`);
      for (const name of [...databases, keysOnly]) await redis.set(`atelier-bench-${name}:bull:q:meta`, 'x');
      await redis.xadd(`atelier-bench-${stale}-floor:calls`, '*', 'job', '1');
      // The killed bench's services outlive it and still hold their database.
      const url = new URL(env.benchPostgresUrl);
      url.pathname = `/${busy}`;
      holder = new pg.Client({ connectionString: url.toString() });
      await holder.connect();

      const { removed, kept } = await env.sweepStaleBenchRuns();

      expect(removed).toEqual(expect.arrayContaining([stale, expect.stringContaining(keysOnly)]));
      expect(kept).toEqual(expect.arrayContaining([expect.stringContaining(busy)]));
      for (const name of [stale, live, elsewhere]) expect(kept.join()).not.toContain(name);
      const { rows } = await admin.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname = ANY($1)', [databases]);
      expect(rows.map((r) => r.datname).sort()).toEqual([busy, live, elsewhere].sort());
      const left = async (name: string) => (await redis.keys(`atelier-bench-${name}*`)).length;
      expect(await left(stale)).toBe(0);
      expect(await left(keysOnly)).toBe(0);
      expect(await left(busy)).toBe(1);
      expect(await left(live)).toBe(1);
      expect(await left(elsewhere)).toBe(1);
      // This run's own database is never a dead run's.
      expect(await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [new URL(db.databaseUrl).pathname.slice(1)])).toHaveProperty('rowCount', 1);
    } finally {
      await holder?.end();
      for (const name of databases) await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      for (const name of [...databases, keysOnly]) {
        const keys = await redis.keys(`atelier-bench-${name}*`);
        if (keys.length) await redis.del(...keys);
      }
      redis.disconnect();
      await admin.end();
      await db.drop();
    }
  });
});

describe('the processes a bench starts', () => {
  const preload = path.join(__dirname, 'die-with-bench.cjs');
  const gone = (pid: number) => {
    try {
      process.kill(pid, 0);
      return false;
    } catch {
      return true;
    }
  };
  /** Polls (no fixed sleep) until every pid is gone, or the deadline passes; says which are left. */
  const waitGone = async (pids: number[], deadlineMs: number) => {
    const end = Date.now() + deadlineMs;
    while (pids.some((p) => !gone(p)) && Date.now() < end) await pause(50);
    return pids.filter((p) => !gone(p));
  };
  /**
   * A stand-in bench: it starts three servers (which never end on their own), linked as the
   * benches link them or not at all, prints their pids, and waits to be killed.
   */
  const bench = (linked: boolean) => {
    const server = "require('node:http').createServer().listen(0, '127.0.0.1', () => console.log(process.pid))";
    const args = linked ? JSON.stringify(['--require', preload, '-e', server]) : JSON.stringify(['-e', server]);
    const parent = `
      const { spawn } = require('node:child_process');
      const start = (stdio) => spawn(process.execPath, ${args}, { stdio }).pid;
      const pids = [start(['ignore', 'inherit', 'inherit', 'pipe']), start(['ignore', 'inherit', 'inherit', 'ipc'])];
      const viaShell = spawn('sh', ['-c', 'exec "$0" "$@"', process.execPath, ...${args}], { stdio: ['ignore', 'inherit', 'inherit', 'pipe'] }).pid;
      console.log(JSON.stringify([...pids, viaShell]));
      setInterval(() => {}, 1000);`;
    return spawn(process.execPath, ['-e', parent], { stdio: ['ignore', 'pipe', 'inherit'] });
  };
  const childrenOf = (parent: ReturnType<typeof spawn>) =>
    new Promise<number[]>((resolve) => {
      let out = '';
      parent.stdout!.on('data', (d: Buffer) => {
        out += d;
        const lines = out.split('\n');
        const pids = lines.find((l) => l.startsWith('[')) ? (JSON.parse(lines.find((l) => l.startsWith('['))!) as number[]) : undefined;
        // Every child printed its pid once listening: the link is set up by then.
        if (pids && pids.every((p) => lines.includes(String(p)))) resolve(pids);
      });
    });

  it('end when the bench is killed with SIGKILL: through fd 3, the IPC channel, or a wrapper that execs node', async () => {
    const linked = bench(true);
    const unlinked = bench(false);
    const [pids, control] = await Promise.all([childrenOf(linked), childrenOf(unlinked)]);
    try {
      linked.kill('SIGKILL');
      unlinked.kill('SIGKILL');
      expect(await waitGone(pids, 10_000)).toEqual([]);
      // Without the link the same servers outlive their bench: what the link is for.
      expect(await waitGone(control, 1_000)).toEqual(control);
    } finally {
      for (const pid of [...pids, ...control]) if (!gone(pid)) process.kill(pid, 'SIGKILL');
    }
  });
});

describe("a bench's scratch directories", () => {
  it('go when the run exits, and a killed run\'s go with the next bench that makes one', () => {
    const deadPid = spawnSync(process.execPath, ['-e', '']).pid;
    const stale = fs.mkdtempSync(path.join(os.tmpdir(), `atelier-bench-tmp-${deadPid}-catalog-`));
    fs.writeFileSync(path.join(stale, 'bench-remote.json'), '{}');
    const live = fs.mkdtempSync(path.join(os.tmpdir(), `atelier-bench-tmp-${process.ppid}-queue-`));
    try {
      // A run that makes one and ends, by returning or by process.exit, as an interrupted bench does.
      const made: string[] = [];
      for (const ending of ['', 'process.exit(3);']) {
        const run = spawnSync(
          process.execPath,
          ['--input-type=module', '-e', `const { benchTempDir } = await import(${JSON.stringify(pathToFileURL(path.join(__dirname, 'bench-env.mjs')).href)}); const dir = benchTempDir('spec'); console.log(dir); ${ending}`],
          { encoding: 'utf8' },
        );
        const dir = run.stdout.trim().split('\n').pop()!;
        expect(path.basename(dir)).toMatch(new RegExp(`^atelier-bench-tmp-${run.pid}-spec-`));
        made.push(dir);
      }
      for (const dir of made) expect(fs.existsSync(dir)).toBe(false);
      expect(fs.existsSync(stale)).toBe(false);
      expect(fs.existsSync(live)).toBe(true);
    } finally {
      fs.rmSync(stale, { recursive: true, force: true });
      fs.rmSync(live, { recursive: true, force: true });
    }
  });
});

describe("the hypervisor's share of the machine's CPU time (steal)", () => {
  type Ticks = { total: number; steal: number };
  const host = () => env as unknown as { hostCpuTicks(stat?: string): Ticks; stealPercent(before: Ticks, after: Ticks): number };

  it("is read from /proc/stat's cpu line and taken over the interval between two readings", () => {
    // user nice system idle iowait irq softirq steal guest guest_nice: guest time is inside user, not added again.
    const before = host().hostCpuTicks('cpu  1000 10 200 5000 50 0 40 100 700 0\ncpu0 500 5 100 2500 25 0 20 50 350 0\n');
    const after = host().hostCpuTicks('cpu  1150 10 230 5100 50 0 45 120 800 0\ncpu0 575 5 115 2550 25 0 22 60 400 0\n');
    expect(before).toEqual({ total: 6400, steal: 100 });
    expect(host().stealPercent(before, after)).toBeCloseTo((100 * 20) / 305, 6);
    expect(host().stealPercent(before, before)).toBe(0);
  });

  it("counts this machine's own clock: a busy stretch moves the total on", () => {
    const before = host().hostCpuTicks();
    const until = Date.now() + 120;
    while (Date.now() < until);
    const after = host().hostCpuTicks();
    // USER_HZ is 100: 120 ms of one busy core is at least ~10 ticks of the machine's total.
    expect(after.total - before.total).toBeGreaterThanOrEqual(8);
    expect(after.steal).toBeGreaterThanOrEqual(before.steal);
    const pct = host().stealPercent(before, after);
    expect(pct).toBeGreaterThanOrEqual(0);
    expect(pct).toBeLessThanOrEqual(100);
  });
});
