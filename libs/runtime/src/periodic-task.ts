/**
 * Runs `task` every `intervalMs` in the background, never two runs at once (a slow run makes the
 * next tick skip, not pile up). Errors go to `onError`; the timer never keeps the process alive.
 * `stop()` clears the timer and waits for a run in flight, so shutdown does not cut one short.
 */
export function runPeriodically(intervalMs: number, task: () => Promise<unknown>, onError: (err: Error) => void): { stop(): Promise<void> } {
  let running: Promise<void> | undefined;
  const timer = setInterval(() => {
    running ??= task()
      .then(() => undefined, onError)
      .finally(() => (running = undefined));
  }, intervalMs);
  timer.unref();
  return {
    stop: async () => {
      clearInterval(timer);
      await running;
    },
  };
}
