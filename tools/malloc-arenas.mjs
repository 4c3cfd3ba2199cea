// The apps that render with libvips (sharp) run with at most two glibc malloc arenas, as the
// Dockerfile's CMD starts them. Each libvips worker thread otherwise takes an arena of its own,
// glibc rarely hands an arena's freed pages back, and the high-water of every arena stays
// resident: in a 30-minute `npm run soak`, queue-worker's memory outside V8's heap grew 67 MB/h
// (15 arenas, 121 MB resident in them) while its heap stayed flat; with two arenas (and libvips'
// cache off) it levelled off at 150-159 MB, 23 MB of it in arenas. An operator's own
// MALLOC_ARENA_MAX wins.
//
// The events app runs with V8's young generation capped at 2 MB per semi-space
// (--max-semi-space-size in NODE_OPTIONS), as the Dockerfile's CMD starts it too. A keep-alive
// round writes to every open stream at once; with V8's default (up to 16 MB) the young generation
// grew to fit that burst and kept its pages: about 5 KB of resident memory per idle stream at
// 10,000 (docs/benchmarks.md). An operator's own --max-semi-space-size wins.

/** The apps whose processes render images or video frames with libvips. */
export const LIBVIPS_APPS = Object.freeze(['media', 'queue-worker']);

/** The V8 option the events app starts with. */
export const EVENTS_NODE_OPTION = '--max-semi-space-size=2';

/**
 * The environment to start `app` with: `env`, with MALLOC_ARENA_MAX=2 for a libvips app that has
 * none, and EVENTS_NODE_OPTION added to NODE_OPTIONS for the events app unless it sets the size.
 */
export function appEnvironment(app, env) {
  if (LIBVIPS_APPS.includes(app) && !env.MALLOC_ARENA_MAX) return { ...env, MALLOC_ARENA_MAX: '2' };
  if (app === 'events' && !(env.NODE_OPTIONS ?? '').includes('--max-semi-space-size'))
    return { ...env, NODE_OPTIONS: env.NODE_OPTIONS ? `${env.NODE_OPTIONS} ${EVENTS_NODE_OPTION}` : EVENTS_NODE_OPTION };
  return env;
}
