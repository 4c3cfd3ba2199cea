// tools/supervisor.mjs (what `npm start` runs the six services with), against real child processes.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

interface Supervisor {
  stop(code?: number): Promise<number>;
  readonly stopping: boolean;
  restarts(): Record<string, number>;
  pid(name: string): number | undefined;
}
type Supervise = (
  apps: { name: string }[],
  opts: {
    spawnApp: (app: { name: string }) => ChildProcess;
    log?: (m: string) => void;
    onGiveUp?: (app: { name: string }, reason: string) => void;
    firstRestartDelayMs?: number;
    crashLoopExits?: number;
    crashLoopWindowMs?: number;
  },
) => Supervisor;

const SUPERVISOR = path.resolve(__dirname, '../supervisor.mjs');

async function until<T>(check: () => T | undefined | false, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('npm start supervisor', () => {
  let supervise: Supervise;
  let dir: string;
  const running: Supervisor[] = [];
  const alive = (pid: number | undefined) => {
    if (!pid) return false;
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  /** A service script: `steady` runs until stopped; `crash-once` exits 1 on its first run only; `crash` always exits 1. */
  const script = (kind: 'steady' | 'crash-once' | 'crash') => {
    const file = path.join(dir, `${kind}.cjs`);
    const marker = path.join(dir, `${kind}.ran`);
    writeFileSync(
      file,
      kind === 'steady'
        ? `console.log('up'); setInterval(() => {}, 1000); process.on('SIGTERM', () => process.exit(0));`
        : kind === 'crash'
          ? `console.error('boom: bad config'); process.exit(1);`
          : `const fs = require('fs'); if (!fs.existsSync(${JSON.stringify(marker)})) { fs.writeFileSync(${JSON.stringify(marker)}, '1'); console.error('first run crashes'); process.exit(1); }
             setInterval(() => {}, 1000); process.on('SIGTERM', () => process.exit(0));`,
    );
    return file;
  };
  const start = (apps: Record<string, string>, extra: Partial<Parameters<Supervise>[1]> = {}) => {
    const logs: string[] = [];
    const s = supervise(
      Object.keys(apps).map((name) => ({ name })),
      {
        spawnApp: (app) => spawn(process.execPath, [apps[app.name]], { stdio: ['ignore', 'pipe', 'pipe'] }),
        log: (m) => logs.push(m),
        firstRestartDelayMs: 50,
        ...extra,
      },
    );
    running.push(s);
    return { s, logs };
  };

  beforeAll(async () => {
    supervise = ((await import(pathToFileURL(SUPERVISOR).href)) as { supervise: Supervise }).supervise;
    dir = mkdtempSync(path.join(tmpdir(), 'atelier-supervisor-'));
  });
  afterAll(async () => {
    for (const s of running) await s.stop();
  });

  it('restarts a crashed service, says why with its last lines, and leaves the others running', async () => {
    const { s, logs } = start({ steady: script('steady'), flaky: script('crash-once') });
    const steadyPid = await until(() => s.pid('steady'));
    await until(() => s.restarts().flaky === 1 && alive(s.pid('flaky')));
    expect(logs.join('\n')).toMatch(/flaky exited unexpectedly \(code 1\); restarting it in 50 ms; its last lines:\n\s+first run crashes/);
    // The healthy one was never touched.
    expect(s.pid('steady')).toBe(steadyPid);
    expect(alive(steadyPid)).toBe(true);
    expect(s.stopping).toBe(false);
    // Ctrl-C: everything stops, nothing is restarted.
    const pids = [s.pid('steady'), s.pid('flaky')];
    expect(await s.stop(0)).toBe(0);
    expect(pids.map(alive)).toEqual([false, false]);
    expect(s.restarts().flaky).toBe(1);
  });

  it('gives up on a crash loop, says why, and stops the rest', async () => {
    let gaveUp = '';
    const { s } = start({ steady: script('steady'), broken: script('crash') }, { crashLoopExits: 5, onGiveUp: (_app, reason) => (gaveUp = reason) });
    const steadyPid = await until(() => s.pid('steady'));
    await until(() => gaveUp);
    expect(gaveUp).toMatch(/broken exited 5 times within 60 s \(last: code 1\); giving up/);
    expect(gaveUp).toContain('boom: bad config');
    expect(s.restarts().broken).toBe(4);
    await until(() => !alive(steadyPid));
  });
});
