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

import { memoryBytes } from '../../deploy/memory-quantity.mjs';
import { ownerGone } from './pids.mjs';

const PREFIX = 'atelier-bench-';

/** BENCH_POD_MEMORY's size ("512Mi", "1Gi", a byte count: a Kubernetes memory quantity) in bytes. */
export function parseMemory(text) {
  try {
    return memoryBytes(text);
  } catch (err) {
    throw new Error(`BENCH_POD_MEMORY: ${err.message}`);
  }
}

/**
 * Where memory cgroups are made and which interface they have: cgroup v2 (one hierarchy with the
 * memory controller enabled) or v1 (a memory hierarchy of its own). `root` is the cgroup mount.
 */
export function memoryController(root = '/sys/fs/cgroup') {
  const v2 = path.join(root, 'cgroup.controllers');
  if (fs.existsSync(v2) && fs.readFileSync(v2, 'utf8').split(/\s+/).includes('memory')) return { kind: 'v2', dir: root };
  const v1 = path.join(root, 'memory');
  if (fs.existsSync(path.join(v1, 'memory.limit_in_bytes'))) return { kind: 'v1', dir: v1 };
  throw new Error('BENCH_POD_MEMORY: no writable memory cgroup controller here (needs root, cgroup v2 or v1)');
}

/**
 * A fresh memory cgroup of `bytes` named `name`. `wrap(command, args)` gives the command and
 * arguments that start that program inside it (the shell joins the cgroup, then execs, so the
 * pid stays the program's); `report()` reads its peak and limit hits; `remove()` deletes it once
 * its processes are gone.
 */
export function podCgroup(name, bytes, controller = memoryController()) {
  const { kind } = controller;
  const dir = path.join(controller.dir, `${PREFIX}${process.pid}-${name}`);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, kind === 'v2' ? 'memory.max' : 'memory.limit_in_bytes'), String(bytes));
  const read = (file) => fs.readFileSync(path.join(dir, file), 'utf8');
  return {
    dir,
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

/**
 * Removes the cgroups an earlier bench left behind when it was killed before its clean-up (SIGKILL,
 * a crash): those whose bench process is gone and that hold no process. Returns what it removed and
 * what it could not, by name.
 */
export function sweepStalePods(controller = memoryController()) {
  const removed = [];
  const kept = [];
  for (const entry of fs.readdirSync(controller.dir, { withFileTypes: true })) {
    if (!entry.isDirectory() || !ownerGone(entry.name, PREFIX)) continue;
    try {
      fs.rmdirSync(path.join(controller.dir, entry.name));
      removed.push(entry.name);
    } catch {
      // A process still in it (a service the killed bench started): the kernel refuses, so it stays.
      kept.push(entry.name);
    }
  }
  return { removed, kept };
}

/** A running process's peak resident set (VmHWM), in bytes; 0 once it is gone. */
export function peakRss(pid) {
  try {
    return Number(/VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}
