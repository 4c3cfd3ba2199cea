import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

// The cgroup files are the kernel's on a real machine; here a temporary directory laid out as a
// cgroup v2 or v1 mount stands in for them, so the bench's reading of each layout is checked
// without root. What the kernel does with a limit (sizing Node's heap, OOM kills) is not.
type Controller = { kind: 'v2' | 'v1'; dir: string };
type Pod = {
  dir: string;
  wrap(command: string, args: string[]): [string, string[]];
  report(): { peakBytes: number; limitHits: number; oomKills: number };
};
type PodMemory = {
  parseMemory(text: string): number;
  memoryController(root?: string): Controller;
  podCgroup(name: string, bytes: number, controller?: Controller): Pod;
  sweepStalePods(controller?: Controller): { removed: string[]; kept: string[] };
};

let pm: PodMemory;
let mount: string;
beforeAll(async () => {
  pm = (await import(pathToFileURL(path.join(__dirname, 'pod-memory.mjs')).href)) as PodMemory;
});
beforeEach(() => {
  mount = fs.mkdtempSync(path.join(os.tmpdir(), 'atelier-cgroup-'));
});
afterEach(() => fs.rmSync(mount, { recursive: true, force: true }));

const write = (file: string, text: string) => fs.writeFileSync(file, text);
const asV2 = () => write(path.join(mount, 'cgroup.controllers'), 'cpuset cpu io memory pids\n');
const asV1 = () => {
  fs.mkdirSync(path.join(mount, 'memory'));
  write(path.join(mount, 'memory', 'memory.limit_in_bytes'), '9223372036854771712\n');
};

/** A pid that belonged to a process and no longer does. */
const deadPid = () => {
  const run = spawnSync(process.execPath, ['-p', 'process.pid'], { encoding: 'utf8' });
  return Number(run.stdout);
};

describe('BENCH_POD_MEMORY sizes', () => {
  it('takes a Kubernetes memory quantity and names the variable when it is not one', () => {
    expect(pm.parseMemory('512Mi')).toBe(512 * 2 ** 20);
    expect(() => pm.parseMemory('half a gig')).toThrow(/^BENCH_POD_MEMORY: not a memory quantity/);
  });
});

describe('pod cgroups', () => {
  it('finds the memory controller of either cgroup version, and says so when there is none', () => {
    expect(() => pm.memoryController(mount)).toThrow(/no writable memory cgroup controller/);
    write(path.join(mount, 'cgroup.controllers'), 'cpu io pids\n');
    expect(() => pm.memoryController(mount)).toThrow(/no writable memory cgroup controller/);
    asV1();
    expect(pm.memoryController(mount)).toEqual({ kind: 'v1', dir: path.join(mount, 'memory') });
    asV2();
    expect(pm.memoryController(mount)).toEqual({ kind: 'v2', dir: mount });
  });

  it.each([
    ['v2', asV2, 'memory.max'],
    ['v1', asV1, 'memory.limit_in_bytes'],
  ])('sets the limit (%s) and starts the program inside with its own pid', async (_kind, layout, limitFile) => {
    layout();
    const pod = pm.podCgroup('gateway-0', 512 * 2 ** 20, pm.memoryController(mount));
    expect(fs.readFileSync(path.join(pod.dir, limitFile), 'utf8')).toBe(String(512 * 2 ** 20));

    const [command, args] = pod.wrap(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    await new Promise((resolve) => child.once('exit', resolve));
    // The bench reads CPU and peak RSS by the pid it spawned: the shell must have become the program.
    expect(Number(out)).toBe(child.pid);
    expect(fs.readFileSync(path.join(pod.dir, 'cgroup.procs'), 'utf8').trim()).toBe(String(child.pid));
  });

  it('reads the peak, the limit hits and the OOM kills from each version', () => {
    asV2();
    const v2 = pm.podCgroup('chat-0', 2 ** 29, pm.memoryController(mount));
    write(path.join(v2.dir, 'memory.peak'), '280000000\n');
    write(path.join(v2.dir, 'memory.events'), 'low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\noom_group_kill 0\n');
    expect(v2.report()).toEqual({ peakBytes: 280000000, limitHits: 7, oomKills: 1 });

    fs.rmSync(path.join(mount, 'cgroup.controllers'));
    asV1();
    const v1 = pm.podCgroup('chat-1', 2 ** 29, pm.memoryController(mount));
    write(path.join(v1.dir, 'memory.max_usage_in_bytes'), '270000000\n');
    write(path.join(v1.dir, 'memory.failcnt'), '3\n');
    write(path.join(v1.dir, 'memory.oom_control'), 'oom_kill_disable 0\nunder_oom 0\noom_kill 2\n');
    expect(v1.report()).toEqual({ peakBytes: 270000000, limitHits: 3, oomKills: 2 });
  });

  it("removes a killed bench's cgroups, never a running bench's, nor one the kernel refuses to remove", () => {
    asV2();
    const gone = deadPid();
    const stale = `atelier-bench-${gone}-gateway-0`;
    const busy = `atelier-bench-${gone}-chat-0`;
    const mine = `atelier-bench-${process.pid}-gateway-0`;
    for (const name of [stale, busy, mine, 'kubepods', 'atelier-bench-x']) fs.mkdirSync(path.join(mount, name));
    // rmdir refuses a directory with something in it, as the kernel refuses a cgroup with a process in it.
    write(path.join(mount, busy, 'cgroup.procs'), '4242\n');

    expect(pm.sweepStalePods(pm.memoryController(mount))).toEqual({ removed: [stale], kept: [busy] });
    expect(fs.readdirSync(mount).sort()).toEqual([busy, mine, 'atelier-bench-x', 'cgroup.controllers', 'kubepods'].sort());
  });
});
