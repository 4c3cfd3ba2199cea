// The apps that render with libvips (sharp) run with at most two glibc malloc arenas, as the
// Dockerfile's CMD starts them. Each libvips worker thread otherwise takes an arena of its own,
// glibc rarely hands an arena's freed pages back, and the high-water of every arena stays
// resident: in a 30-minute `npm run soak`, queue-worker's memory outside V8's heap grew 67 MB/h
// (15 arenas, 121 MB resident in them) while its heap stayed flat; with two arenas (and libvips'
// cache off) it levelled off at 150-159 MB, 23 MB of it in arenas. An operator's own
// MALLOC_ARENA_MAX wins.

/** The apps whose processes render images or video frames with libvips. */
export const LIBVIPS_APPS = Object.freeze(['media', 'queue-worker']);

/** The environment to start `app` with: `env`, with MALLOC_ARENA_MAX=2 for a libvips app that has none. */
export function appEnvironment(app, env) {
  return LIBVIPS_APPS.includes(app) && !env.MALLOC_ARENA_MAX ? { ...env, MALLOC_ARENA_MAX: '2' } : env;
}
