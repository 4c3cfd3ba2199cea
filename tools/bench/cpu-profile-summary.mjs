// Summarizes a V8 CPU profile (`node --cpu-prof`, what BENCH_PROFILE writes) over chosen time
// windows: where a service's main thread spent a measured phase, by package and by function.
// A whole-run profile is mostly start-up (module loading, schema compilation) and idle time,
// which bury the request path; restricted to the phase, the shares add up to what it cost.
//
// Usage: node tools/bench/cpu-profile-summary.mjs <file.cpuprofile> [<from µs> <to µs> ...]
// Windows are in the profile's clock, CLOCK_MONOTONIC in µs: what `process.hrtime.bigint() / 1000n`
// reads in any process on the machine (the bench records its phases with it).
//
// How to read it: V8 samples the thread's stack at an interval, and a sample taken while the thread
// is inside a system call is charged to that call. On a machine where the processes outnumber the
// cores, a socket write that wakes its reader can lose the CPU to it before returning, so the
// "socket writes" line counts that wait as well as the kernel's work: for CPU alone, use BENCH_PERF.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Native functions through which Node writes to sockets; their samples are the system call. */
const SOCKET_WRITES = new Set(['writev', 'writeBuffer', 'writeUtf8String', 'writeLatin1String', 'writeUcs2String', 'writeAsciiString']);

/** Where a frame's code comes from: an npm package, a part of Node, atelier's own lib or app, or V8 itself. */
export function originOf(callFrame) {
  const { url, functionName } = callFrame;
  if (!url) return SOCKET_WRITES.has(functionName) ? 'socket writes (system call)' : functionName.startsWith('(') ? functionName : 'native';
  const pkg = url.match(/node_modules\/((?:@[^/]+\/)?[^/]+)\//);
  if (pkg) return pkg[1];
  if (url.startsWith('node:')) return `node: ${url.slice(5).replace(/^internal\//, '').split('/')[0]}`;
  const own = url.match(/\/((?:libs|apps)\/[^/]+)\//);
  if (own) return own[1];
  if (url.startsWith('wasm://')) return 'WebAssembly';
  return url;
}

/** A script's path from its package or atelier project on (compiled code: the .js beside its .ts). */
function placeOf(url) {
  return url.replace(/^.*node_modules\//, '').replace(/^.*\/((?:libs|apps)\/)/, '$1').replace(/^file:\/\//, '');
}

/**
 * The samples taken inside `windows` (pairs of µs in the profile's clock; none: the whole profile),
 * with the idle ones set apart: `busy` of them ran code, shared out by origin and by function (self time).
 */
export function summarizeCpuProfile(profile, windows = []) {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const inWindow = windows.length === 0 ? () => true : (t) => windows.some(([from, to]) => t >= from && t <= to);
  const byOrigin = new Map();
  const byFunction = new Map();
  let at = profile.startTime;
  let samples = 0;
  let idle = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0;
    if (!inWindow(at)) continue;
    samples++;
    const frame = nodes.get(profile.samples[i]).callFrame;
    if (frame.functionName === '(idle)') {
      idle++;
      continue;
    }
    const origin = originOf(frame);
    byOrigin.set(origin, (byOrigin.get(origin) ?? 0) + 1);
    const fn = `${frame.functionName || '(anonymous)'}  ${frame.url ? `${placeOf(frame.url)}:${frame.lineNumber + 1}` : origin}`;
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + 1);
  }
  const busy = samples - idle;
  const ranked = (m) => [...m].sort((a, b) => b[1] - a[1]).map(([name, count]) => ({ name, count, share: count / busy }));
  return { samples, idle, busy, byOrigin: ranked(byOrigin), byFunction: ranked(byFunction) };
}

/** The summary as indented lines: the busy share, then the top origins and functions. */
export function formatCpuProfileSummary(summary, top = 12, indent = '   ') {
  const pct = (share) => `${(100 * share).toFixed(1).padStart(5)} %`;
  if (summary.busy === 0) return [`${indent}no samples in the window`];
  return [
    `${indent}${summary.samples} samples in the window, ${pct(summary.busy / summary.samples).trim()} of them running code; as a share of those:`,
    `${indent}by origin:`,
    ...summary.byOrigin.slice(0, top).map((o) => `${indent}  ${pct(o.share)}  ${o.name}`),
    `${indent}by function (self time):`,
    ...summary.byFunction.slice(0, top).map((f) => `${indent}  ${pct(f.share)}  ${f.name}`),
  ];
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [file, ...bounds] = process.argv.slice(2);
  if (!file || bounds.length % 2 !== 0) {
    console.error('usage: node tools/bench/cpu-profile-summary.mjs <file.cpuprofile> [<from µs> <to µs> ...]');
    process.exit(2);
  }
  const windows = [];
  for (let i = 0; i < bounds.length; i += 2) windows.push([Number(bounds[i]), Number(bounds[i + 1])]);
  console.log(formatCpuProfileSummary(summarizeCpuProfile(JSON.parse(fs.readFileSync(file, 'utf8')), windows), 25).join('\n'));
}
