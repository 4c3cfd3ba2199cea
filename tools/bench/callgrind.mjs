// Instructions per request (bench:chat's phase 6): the services run under valgrind's callgrind,
// which counts the instructions each process executes, and the count over a run of requests is
// divided by the requests.
//
// Why beside the timed phases: these machines differ from each other by 2x and more and are shared
// and noisy, so a difference of a few per cent between the gateway and the floor, or before and
// after a change, is lost in the spread of timed runs. An instruction count is nearly the same for
// the same binary and the same requests, whatever else the machine is doing and however fast it is
// (checked here: windows of 2,000 requests to a warmed node:http server counted 143.5, 143.7 and
// 142.7 million; two bench:chat runs side by side, window for window within a few per cent). Its
// limits: an instruction is not a unit of time (a cache miss, a system call's wait and the kernel's
// own work cost nothing here); work a timer does by the clock is counted per second, so a slower run
// counts a little more of it per request; and V8 goes on optimizing for thousands of requests, so
// only counts after the same number of requests compare.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** Whether valgrind's callgrind runs here. */
export function callgrindAvailable() {
  return spawnSync('valgrind', ['--tool=callgrind', '--version'], { stdio: 'ignore' }).status === 0;
}

/**
 * Wraps a command so that it runs under callgrind, writing its dumps into `dir`. Counting starts
 * off (start-up runs at valgrind's uninstrumented speed) until countFrom() turns it on.
 */
export function callgrindWrap(dir) {
  fs.mkdirSync(dir, { recursive: true });
  return (command, argv) => [
    'valgrind',
    [
      '--tool=callgrind',
      // V8 writes and rewrites machine code in anonymous memory: without this valgrind would run stale translations of it.
      '--smc-check=all-non-file',
      '--instr-atstart=no',
      // valgrind's own messages go beside the dumps, not into the bench's output.
      `--log-file=${path.join(dir, 'valgrind.%p.log')}`,
      `--callgrind-out-file=${path.join(dir, 'callgrind.%p.out')}`,
      command,
      ...argv,
    ],
  ];
}

/**
 * The environment callgrind_control needs to reach `pid`: valgrind names the pipes it listens on
 * after the USER or LOGNAME and HOST of the program's environment, and callgrind_control looks for
 * them under its own. A service's HOST is the address it binds, not the bench's.
 */
function reaching(pid) {
  let environ;
  try {
    environ = fs.readFileSync(`/proc/${pid}/environ`, 'utf8');
  } catch {
    throw new Error(`callgrind: no process ${pid}`);
  }
  const theirs = Object.fromEntries(
    environ
      .split('\0')
      .map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]),
  );
  const env = { ...process.env };
  for (const name of ['USER', 'LOGNAME', 'HOST']) {
    if (name in theirs) env[name] = theirs[name];
    else delete env[name];
  }
  return env;
}

/** callgrind_control's commands to one process (valgrind runs the program in the pid the wrapper was spawned with). */
function control(pid, ...args) {
  const run = spawnSync('callgrind_control', [...args, String(pid)], { encoding: 'utf8', env: reaching(pid) });
  // It exits 0 (and may print OK) when it could not reach the process: only its messages say so.
  if (run.status !== 0 || /^Error:|not detected|syscall failed|error opening/m.test(`${run.stdout}\n${run.stderr}`)) throw new Error(`callgrind_control ${args.join(' ')} ${pid}: ${run.stderr || run.stdout}`);
}

/** Turns counting on in each process (it stays on; instructionsDuring then counts from zero each time). */
export function countFrom(pids) {
  for (const pid of pids) control(pid, '--instr=on');
}

/** The instruction total of one callgrind dump (its `totals:` line; events default to Ir alone). */
export function dumpTotal(text) {
  const match = /^totals:\s+(\d+)/m.exec(text);
  if (!match) throw new Error('not a callgrind dump: no totals line');
  return Number(match[1]);
}

/**
 * What V8 does beside running the requests, by the names callgrind gives its C++ functions (the
 * node binary keeps its symbols): its optimizing compilers (Maglev, Turbofan and Turboshaft, and
 * their zone allocator), which go on compiling for thousands of requests, and its garbage collector
 * (marking, sweeping, scavenging, evacuating), whose major collections land in one window in ten and
 * multiply its count. Either one swings a window's count by a quarter or more; what remains (the
 * JavaScript, the builtins and runtime functions it calls, Node's C++ and the system calls' user
 * side) moved by a few per cent between windows in the runs that chose these names.
 */
const PART_OF = [
  ['compile', /v8::internal::(compiler|maglev|baseline)::|turboshaft|v8::internal::Zone::/],
  ['gc', /Marking|Marker|MarkBit|Sweep|Scaveng|MarkCompact|Evacuat|PointersUpdating|StringTableCleaner|FreeList|GCTracer|RememberedSet|SlotSet|IterateObjectCache|FlushedBytecode|heap::base::|cppgc::/],
];

/** The part of a count a function's own instructions go in, by its name (PART_OF): compile, gc or requests. */
export const partOf = (name) => PART_OF.find(([, pattern]) => pattern.test(name))?.[0] ?? 'requests';

/**
 * Names for the machine code V8 generates, which callgrind can only call by its address: the map
 * a process started with --perf-basic-prof writes (/tmp/perf-<pid>.map: start, size and name in
 * hex, one region per line). Returns address => name, or undefined where no region holds it.
 *
 * The map only grows: when V8 frees code (a function deoptimized, recompiled, collected) and puts
 * new code where it was, the new region's line comes after the old one's, which stays. So the last
 * line holding an address names it; taking any line that holds it named the gateway's calls after
 * functions they never reached (a pg-protocol parser "calling" Node's module loader for 60k
 * instructions per request, ajv compiling schemas in the middle of a chat request): 542 of one
 * run's 18,775 regions overlapped an earlier one.
 */
export function jitNames(pid) {
  let text;
  try {
    text = fs.readFileSync(`/tmp/perf-${pid}.map`, 'utf8');
  } catch {
    return () => undefined;
  }
  // [start, size, name, line], by start.
  const regions = text
    .split('\n')
    .map((line) => /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line))
    .filter(Boolean)
    .map(([, start, size, name], line) => [parseInt(start, 16), parseInt(size, 16), name, line])
    .sort((a, b) => a[0] - b[0]);
  const widest = Math.max(0, ...regions.map(([, size]) => size));
  return (address) => {
    // The last region starting at or below the address, then back through every one that could still reach it.
    let [lo, hi] = [0, regions.length - 1];
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (regions[mid][0] <= address) lo = mid + 1;
      else hi = mid - 1;
    }
    let found;
    for (let i = hi; i >= 0 && regions[i][0] > address - widest; i--) {
      const [start, size, name, line] = regions[i];
      if (address < start + size && (!found || line > found[1])) found = [name, line];
    }
    return found?.[0];
  };
}

/**
 * One callgrind dump's instructions as { total, compile, gc, requests, functions }: each function's own
 * (exclusive) count put in the part its name says (PART_OF), the rest under `requests`, and in
 * `functions` by name (JIT code named by `jit`, jitNames', where callgrind has only its address).
 * The format: `fn=(id) name` opens a function (later only `fn=(id)`), `cfn=` names a callee the
 * same way, cost lines are `<position> <count>`, and the line after `calls=` is what a call cost
 * inclusively, which its callee counts as its own already.
 */
export function dumpParts(text, jit = () => undefined) {
  const names = new Map();
  const parts = { total: 0, compile: 0, gc: 0, requests: 0 };
  const functions = new Map();
  let part = 'requests';
  let fn = '';
  let afterCall = false;
  for (const line of text.split('\n')) {
    const named = /^c?fn=\((\d+)\)(?: (.*))?$/.exec(line);
    if (named) {
      if (named[2] !== undefined) names.set(named[1], named[2]);
      if (line.startsWith('fn=')) {
        fn = names.get(named[1]) ?? '';
        if (/^0x[0-9a-f]+$/.test(fn)) fn = jit(parseInt(fn, 16)) ?? fn;
        part = partOf(fn);
      }
      continue;
    }
    if (line.startsWith('calls=')) {
      afterCall = true;
      continue;
    }
    const cost = /^(?:[+-]?\d+|\*)\s+(\d+)/.exec(line);
    if (!cost) continue;
    if (afterCall) {
      afterCall = false;
      continue;
    }
    parts[part] += Number(cost[1]);
    parts.total += Number(cost[1]);
    functions.set(fn, (functions.get(fn) ?? 0) + Number(cost[1]));
  }
  const stated = dumpTotal(text);
  // Every count is in one function or another: a total that does not add up is a format not understood.
  if (parts.total !== stated) throw new Error(`callgrind dump: its functions add up to ${parts.total}, its totals line says ${stated}`);
  return { ...parts, functions };
}

/** Numbered dumps callgrind has written for `pid` into `dir`, as [number, file]. */
function dumpsOf(dir, pid) {
  const name = new RegExp(`^callgrind\\.${pid}\\.out\\.(\\d+)$`);
  return fs.readdirSync(dir).flatMap((f) => {
    const m = name.exec(f);
    return m ? [[Number(m[1]), path.join(dir, f)]] : [];
  });
}

/**
 * The dump `find` names and its text, once callgrind has finished writing it (its totals line comes
 * last): callgrind_control can return before the process has taken the command.
 */
async function written(find, pid, timeoutMs = 60_000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const file = find();
    const text = file ? fs.readFileSync(file, 'utf8') : '';
    if (/^totals:/m.test(text)) return [file, text];
    if (Date.now() > until) throw new Error(`callgrind wrote no dump for ${pid} within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Runs `run` with each named process's counters zeroed just before and dumped just after, and
 * resolves with what `run` resolved and the instructions each group executed meanwhile (dumpParts).
 * `groups` maps a name to pids (a name's processes are added up). Each dump is removed once read,
 * or moved into the directory `keepIn` names.
 */
export async function instructionsDuring(dir, groups, run, keepIn) {
  const pids = Object.values(groups).flat();
  for (const pid of pids) control(pid, '--zero');
  const result = await run();
  const counts = {};
  for (const [name, list] of Object.entries(groups)) {
    counts[name] = { total: 0, compile: 0, gc: 0, requests: 0, functions: new Map() };
    for (const pid of list) {
      const last = Math.max(0, ...dumpsOf(dir, pid).map(([n]) => n));
      control(pid, '--dump');
      const [file, text] = await written(() => dumpsOf(dir, pid).find(([n]) => n > last)?.[1], pid);
      const { functions, ...parts } = dumpParts(text, jitNames(pid));
      for (const key of Object.keys(parts)) counts[name][key] += parts[key];
      for (const [fn, n] of functions) counts[name].functions.set(fn, (counts[name].functions.get(fn) ?? 0) + n);
      // Read into the counts above, and a run writes 160 of them (40 windows, two paths, two processes),
      // unless they are wanted for callgrind_annotate or kcachegrind.
      if (keepIn) fs.copyFileSync(file, path.join(keepIn, path.basename(file)));
      fs.rmSync(file);
    }
  }
  return [result, counts];
}
