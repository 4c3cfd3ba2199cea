import sharp from 'sharp';

// libvips keeps the last 100 operations with the images they made so that repeating one on the same
// input is free. The local engines never repeat one: every render starts from a new SVG or a new
// upload, so the cache only held memory outside V8's heap: one process rendering 3,000 1024x1024
// scenes ended at 300 MB resident with it and 222 MB without. Off once, for the whole process.
sharp.cache(false);
// One libvips thread per operation, as sharp itself sets on glibc, except that it skips that when
// MALLOC_ARENA_MAX is set, as it is for media and queue-worker (tools/malloc-arenas.mjs): its default
// is then one thread per core of the host, not of the pod, while several renders run side by side
// anyway. With two arenas, 3,000 renders took the same 68 s with 1 thread as with 2 on 2 cores and
// ended at 143 MB resident instead of 155.
sharp.concurrency(1);

export { sharp };
export type { Sharp } from 'sharp';
