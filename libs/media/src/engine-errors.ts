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
