// BENCH_POD_MEMORY (bench:chat): the gateway and chat service each run in a memory cgroup of that
// size, as in a Kubernetes pod with that memory limit. Started inside it (not moved in later), Node
// sizes V8's heap from the limit as it does in the pod, the kernel charges every page the process
// touches to it, and a process that outgrows it is OOM-killed, as the pod would be. At the end the
// bench prints how often each cgroup hit its limit and two peaks that bracket the pod's: the
// cgroup's (page cache included, as the kubelet counts it, but file pages another process read
// first, such as the node binary's, stay charged to that process's cgroup, where a pod reads its
// own) and the process's peak RSS (which counts such shared pages in full).
// Needs root and a writable memory controller (cgroup v2 or v1).
import fs from 'node:fs';
import path from 'node:path';

const V2_ROOT = '/sys/fs/cgroup';
const V1_ROOT = '/sys/fs/cgroup/memory';

/** "512Mi", "1Gi", "512M" or a byte count, in bytes. */
export function parseMemory(text) {
  const m = /^(\d+)(Ki|Mi|Gi|K|M|G)?$/.exec(String(text).trim());
  if (!m) throw new Error(`BENCH_POD_MEMORY: "${text}" is not a size such as 512Mi`);
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, K: 1e3, M: 1e6, G: 1e9 }[m[2]] ?? 1;
  return Number(m[1]) * unit;
}

function controller() {
  const v2 = path.join(V2_ROOT, 'cgroup.controllers');
  if (fs.existsSync(v2) && fs.readFileSync(v2, 'utf8').split(/\s+/).includes('memory')) return 'v2';
  if (fs.existsSync(path.join(V1_ROOT, 'memory.limit_in_bytes'))) return 'v1';
  throw new Error('BENCH_POD_MEMORY: no writable memory cgroup controller here (needs root, cgroup v2 or v1)');
}

/**
 * A fresh memory cgroup of `bytes` named `name`. `wrap(command, args)` gives the command and
 * arguments that start that program inside it (the shell joins the cgroup, then execs, so the
 * pid stays the program's); `report()` reads its peak and limit hits; `remove()` deletes it once
 * its processes are gone.
 */
export function podCgroup(name, bytes) {
  const kind = controller();
  const dir = path.join(kind === 'v2' ? V2_ROOT : V1_ROOT, `atelier-bench-${process.pid}-${name}`);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, kind === 'v2' ? 'memory.max' : 'memory.limit_in_bytes'), String(bytes));
  const read = (file) => fs.readFileSync(path.join(dir, file), 'utf8');
  return {
    wrap: (command, args) => ['/bin/sh', ['-c', 'echo $$ > "$0" && exec "$@"', path.join(dir, 'cgroup.procs'), command, ...args]],
    report() {
      if (kind === 'v2') {
        const events = Object.fromEntries(read('memory.events').trim().split('\n').map((l) => l.split(' ')));
        return { peakBytes: Number(read('memory.peak')), limitHits: Number(events.max ?? 0), oomKills: Number(events.oom_kill ?? 0) };
      }
      const oom = /oom_kill (\d+)/.exec(read('memory.oom_control'));
      return { peakBytes: Number(read('memory.max_usage_in_bytes')), limitHits: Number(read('memory.failcnt')), oomKills: Number(oom?.[1] ?? 0) };
    },
    remove: () => fs.rmdirSync(dir),
  };
}

/** A running process's peak resident set (VmHWM), in bytes; 0 once it is gone. */
export function peakRss(pid) {
  try {
    return Number(/VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}
