import { PerformanceObserver, constants, type PerformanceEntry } from 'node:perf_hooks';
import v8 from 'node:v8';

/** A `gc` entry: its detail says which kind of collection it was. */
type GcEntry = PerformanceEntry & { detail?: { kind?: number } };

/**
 * The V8 heap in use right after the process's last full (mark-compact) collection: its live
 * JavaScript set, the figure a leak makes grow. RSS cannot tell a leak from V8 sizing its heap:
 * under load V8 grows the young generation step by step (8 MB to 128 MB on a 24 GiB host) and
 * lets the old generation reach twice what the last full collection kept
 * (V8_HEAP_GROWING_PERCENT), so a service's RSS saws up and down by 100 MB and more while its
 * live set stays put. Measured with `npm run soak` against `npm start`: the gateway's RSS went
 * from 250 to 411 MB in 12 minutes while its heap after each full collection stayed at 52-53 MB.
 *
 * One observer per process, started by the first caller: full collections come a few a minute at
 * most, and the observer's callback runs after the collection, so the reading includes what was
 * allocated in between (a few hundred KB at the rates measured), not what the collection freed.
 * The count is this observer's own, not prom-client's `nodejs_gc_duration_seconds{kind="major"}`:
 * that one reads only the first entry of each batch the observer is handed, and a batch can hold
 * several collections.
 */
let observer: PerformanceObserver | undefined;
let liveBytes: number | undefined;
let fullCollections = 0;

export function watchLiveHeap(): void {
  if (observer) return;
  observer = new PerformanceObserver((list) => {
    const full = list.getEntries().filter((entry) => (entry as GcEntry).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR).length;
    if (full === 0) return;
    fullCollections += full;
    liveBytes = v8.getHeapStatistics().used_heap_size;
  });
  observer.observe({ entryTypes: ['gc'] });
}

/** The heap in use after the last full collection, in bytes; undefined before the first one. */
export function liveHeapBytes(): number | undefined {
  return liveBytes;
}

/** Full collections seen since watchLiveHeap() was first called. */
export function fullCollectionCount(): number {
  return fullCollections;
}
