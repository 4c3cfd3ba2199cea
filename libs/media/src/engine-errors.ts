import { ApiError } from '@atelier/contracts';

/** The work was stopped because its caller went away or the job was cancelled. */
export class GenerationCancelledError extends ApiError {
  constructor(reason = 'The generation was cancelled') {
    super('timeout', reason);
    this.name = 'GenerationCancelledError';
  }
}

/** A remote provider failed or answered nonsense: 502, with the provider's own words when it gave any. */
export function upstreamError(provider: string, message: string, detail?: unknown): ApiError {
  return new ApiError('upstream_error', `The model provider (${provider}) failed: ${message}`, detail);
}

export function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new GenerationCancelledError();
}

/** A delay that ends early (with GenerationCancelledError) when the signal aborts. */
/**
 * The built-in engines' emulated provider latency (LOCAL_ENGINE_LATENCY_MS), spent as `steps`
 * sampling steps with `onStep(done, steps)` after each, the way a diffusion sampler reports.
 */
export async function sampledSteps(ms: number, steps: number, signal: AbortSignal, onStep?: (done: number, steps: number) => void): Promise<void> {
  const n = Math.max(1, Math.floor(steps));
  if (ms <= 0) {
    throwIfAborted(signal);
    onStep?.(n, n);
    return;
  }
  for (let done = 1; done <= n; done++) {
    await abortableSleep(ms / n, signal);
    onStep?.(done, n);
  }
}

export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  throwIfAborted(signal);
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(new GenerationCancelledError());
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
