// BENCH_PERF (bench:chat): a system-wide `perf record` of the closed loop through the gateway, and
// where its CPU went, process by process and function by function.
//
// Why beside BENCH_PROFILE's V8 profiles: on a machine this busy (six processes on two cores), V8's
// sampler ticks on wall time, and a tick sent to a descheduled thread is taken when it runs again,
// so samples gather where threads get descheduled: most often inside a socket write (it wakes the
// reader, which takes the core). That is our reading; what the numbers show is that in one run
// the gateway's V8 profile put 27 % of its samples in writev/writeUtf8String while the kernel
// time of the whole process was 15 % of its CPU. perf samples CPU time, in every process at once,
// Postgres and Redis included, with JavaScript frames named through --perf-basic-prof.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';

/** Whether `perf` can record here (installed, and allowed to sample every CPU). */
export function perfAvailable() {
  const probe = spawnSync('perf', ['record', '-a', '-o', '/dev/null', '--', 'true'], { stdio: 'ignore' });
  return probe.status === 0;
}

/** Starts recording every CPU (with call graphs) into `file`; resolves with a stop function. */
export async function startPerf(file) {
  const perf = spawn('perf', ['record', '-F', '999', '-a', '-g', '-o', file], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  perf.stderr.on('data', (d) => (err += d));
  // perf prints nothing when it is ready; half a second covers its start-up.
  await new Promise((r) => setTimeout(r, 500));
  if (perf.exitCode !== null) throw new Error(`perf record failed: ${err}`);
  // A bench that dies mid-run must not leave a system-wide recording filling the disk.
  const orphaned = () => perf.kill('SIGINT');
  process.once('exit', orphaned);
  return () =>
    new Promise((resolve) => {
      process.off('exit', orphaned);
      if (perf.exitCode !== null || perf.signalCode !== null) return resolve();
      perf.once('exit', () => resolve());
      perf.kill('SIGINT');
    });
}

/** `perf report` rows as [percent, ...columns]. */
function report(file, args) {
  const out = execFileSync('perf', ['report', '-i', file, '--no-children', '-g', 'none', '--stdio', '--percent-limit', '0.01', ...args], {
    encoding: 'utf8',
    maxBuffer: 1 << 28,
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  return out
    .split('\n')
    .filter((l) => l.trim() && !l.startsWith('#'))
    .map((l) => l.trim().split(/\s{2,}/));
}

/** The thread ids of processes still running (perf attributes samples to threads). */
function threadsOf(pids) {
  return pids.flatMap((pid) => {
    try {
      return fs.readdirSync(`/proc/${pid}/task`).map(Number);
    } catch {
      return [pid];
    }
  });
}

/**
 * Prints each process group's share of all samples (`groups`: name -> pids, or a command name
 * such as 'postgres'), then its hottest functions as a share of that group. Call it while the
 * processes still run: their threads are looked up in /proc.
 */
export function summarizePerf(file, groups, top = 12) {
  const threads = Object.fromEntries(Object.entries(groups).map(([name, members]) => [name, Array.isArray(members) ? new Set(threadsOf(members)) : members]));
  const groupOf = (pidCol) => {
    const [tid, comm] = pidCol.split(':');
    for (const [name, members] of Object.entries(threads)) if (typeof members === 'string' ? comm === members : members.has(Number(tid))) return name;
    return comm === 'swapper' ? 'idle' : 'other';
  };
  // Sorted by pid first: with a --pid filter, perf merges samples of the same function across
  // processes before filtering, and gives one process's samples of a shared binary to another.
  const share = new Map();
  const add = (map, key, pct) => map.set(key, (map.get(key) ?? 0) + pct);
  for (const [pct, pidCol] of report(file, ['--sort', 'pid'])) add(share, groupOf(pidCol), parseFloat(pct));
  const parts = (sortKey) => {
    const byGroup = new Map();
    for (const [pct, pidCol, what] of report(file, ['--sort', `pid,${sortKey}`])) {
      const g = groupOf(pidCol);
      add(byGroup.get(g) ?? byGroup.set(g, new Map()).get(g), what, parseFloat(pct));
    }
    return byGroup;
  };
  const [dsos, syms] = [parts('dso'), parts('sym')];
  console.log(`   perf, share of all CPU samples: ${[...share].sort((a, b) => b[1] - a[1]).map(([g, p]) => `${g} ${p.toFixed(1)} %`).join(', ')}`);
  const ranked = (map) => [...(map ?? [])].sort((a, b) => b[1] - a[1]);
  for (const [g, total] of ranked(share)) {
    if (g === 'idle' || g === 'other' || total < 2) continue;
    const where = ranked(dsos.get(g))
      .slice(0, 4)
      .map(([dso, pct]) => `${dso.replace(/^\[JIT\].*/, 'JIT-compiled JavaScript').replace('[kernel.kallsyms]', 'kernel')} ${((100 * pct) / total).toFixed(0)} %`);
    console.log(`   ${g} (${total.toFixed(1)} % of all samples; ${where.join(', ')}), hottest functions as a share of it:`);
    for (const [sym, pct] of ranked(syms.get(g)).slice(0, top))
      console.log(`     ${((100 * pct) / total).toFixed(1).padStart(5)} %  ${sym.replace(/^\[\.\]\s*/, '').replace(/^\[k\]\s*/, 'kernel: ').slice(0, 110)}`);
  }
}
