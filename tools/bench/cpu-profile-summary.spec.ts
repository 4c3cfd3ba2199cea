import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

type CallFrame = { functionName: string; url: string; lineNumber: number };
type Ranked = { name: string; count: number; share: number }[];
type Summary = { samples: number; idle: number; busy: number; byOrigin: Ranked; byFunction: Ranked };
type ProfileSummary = {
  originOf(frame: CallFrame): string;
  summarizeCpuProfile(profile: unknown, windows?: [number, number][]): Summary;
  formatCpuProfileSummary(summary: Summary, top?: number): string[];
};

let tool: ProfileSummary;
beforeAll(async () => {
  tool = (await import(pathToFileURL(path.join(__dirname, 'cpu-profile-summary.mjs')).href)) as ProfileSummary;
});

const shareOf = (ranked: Ranked, pattern: RegExp) => ranked.filter((r) => pattern.test(r.name)).reduce((sum, r) => sum + r.share, 0);

describe('a V8 CPU profile summarized over a measured window', () => {
  // A real profile: a process spins in one function outside the window and in another inside it,
  // marking the window with the clock the bench uses (process.hrtime, CLOCK_MONOTONIC).
  let profile: unknown;
  let window: [number, number];
  beforeAll(() => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cpu-profile-'));
    const script = path.join(dir, 'spin.mjs');
    fs.writeFileSync(
      script,
      [
        'const now = () => Number(process.hrtime.bigint() / 1000n);',
        // Each spins in its own loop: self time is charged to the function whose code runs.
        ...[['before', 250], ['measured', 400], ['after', 250]].map(
          ([name, ms]) => `function ${name}() { const end = Date.now() + ${ms}; let x = 0; while (Date.now() < end) x++; return x; }`,
        ),
        'before();',
        'const from = now();',
        'measured();',
        'const to = now();',
        'after();',
        'console.log(JSON.stringify([from, to]));',
      ].join('\n'),
    );
    const run = spawnSync(process.execPath, ['--cpu-prof', `--cpu-prof-dir=${dir}`, script], { encoding: 'utf8' });
    expect(run.status).toBe(0);
    window = JSON.parse(run.stdout) as [number, number];
    const file = fs.readdirSync(dir).find((f) => f.endsWith('.cpuprofile'))!;
    profile = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('counts only the samples taken inside the window, in the clock the bench records phases with', () => {
    const inside = tool.summarizeCpuProfile(profile, [window]);
    expect(inside.busy).toBeGreaterThan(100);
    expect(shareOf(inside.byFunction, /^measured /)).toBeGreaterThan(0.8);
    expect(shareOf(inside.byFunction, /^(before|after) /)).toBeLessThan(0.05);

    const whole = tool.summarizeCpuProfile(profile);
    expect(whole.samples).toBeGreaterThan(inside.samples);
    expect(shareOf(whole.byFunction, /^(before|after) /)).toBeGreaterThan(0.3);
  });

  it('names each function with its script and line, and prints the shares', () => {
    const inside = tool.summarizeCpuProfile(profile, [window]);
    expect(inside.byFunction[0].name).toMatch(/^measured .*spin\.mjs:3$/);
    const lines = tool.formatCpuProfileSummary(inside, 3);
    expect(lines[0]).toMatch(/^ +\d+ samples in the window, [\d.]+ % of them running code/);
    expect(lines.some((l) => /^ +\d+\.\d % +measured /.test(l))).toBe(true);
  });

  it('says so when no sample falls in the window', () => {
    expect(tool.formatCpuProfileSummary(tool.summarizeCpuProfile(profile, [[1, 2]]))).toEqual(['   no samples in the window']);
  });
});

describe("a frame's origin", () => {
  it('is the npm package, the part of Node, the atelier project, or the socket write it was in', () => {
    const frame = (url: string, functionName = 'f') => ({ functionName, url, lineNumber: 0 });
    expect(tool.originOf(frame('file:///srv/node_modules/@nestjs/core/router/router-execution-context.js'))).toBe('@nestjs/core');
    expect(tool.originOf(frame('file:///srv/node_modules/fastify/lib/reply.js'))).toBe('fastify');
    expect(tool.originOf(frame('file:///srv/dist/local/libs/billing/src/credit-ledger.service.js'))).toBe('libs/billing');
    expect(tool.originOf(frame('node:internal/streams/writable'))).toBe('node: streams');
    expect(tool.originOf(frame('', 'writev'))).toBe('socket writes (system call)');
    expect(tool.originOf(frame('', '(garbage collector)'))).toBe('(garbage collector)');
  });
});
