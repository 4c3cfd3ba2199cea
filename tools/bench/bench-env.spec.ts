import path from 'node:path';
import { pathToFileURL } from 'node:url';

type Loop = { send: () => Promise<unknown>; groups: Record<string, number[]> };
type Totals = { ok: number; errors: number; lastError?: string; rps: number; latencies: number[]; cpu: { parts: [string, number][]; total: number } };
type BenchEnv = {
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
