import type { Logger } from '@nestjs/common';
import { ApiError, UPSTREAM_RATE_LIMITED } from '@atelier/contracts';
import type { EngineConfig, OpenAiCompatibleEngineConfig } from '@atelier/models';
import { abortFollowing, retryDelayMs, statusFailureKind, type UpstreamFailureKind } from '@atelier/runtime';
import type { ChatProviderCall } from './chat-provider';
import { endpointsOf, type Endpoint } from './upstream-endpoints';
import { retryAfter, type UpstreamResponse } from './upstream-exchange';

/**
 * The attempts of one upstream call: each endpoint in turn, each retried by the shared policy
 * (libs/runtime's upstream-retry) until the first byte of an answer was passed on, each attempt
 * bounded by its endpoint's inactivity timeout.
 */

/**
 * How a failed attempt continues (the shared policy's UpstreamFailureKind): `retry` the same server
 * after a backoff (429, 5xx, timeouts, connection errors, a stream cut before its first chunk), move
 * to the `next` server (this one is misconfigured: missing key, 401/403/404), or stop (`fatal`: the
 * request itself is wrong, or part of the answer was already streamed and cannot be taken back).
 */
export class AttemptError extends Error {
  constructor(
    readonly kind: UpstreamFailureKind,
    readonly apiError: ApiError,
    readonly retryAfterMs?: number,
  ) {
    super(apiError.message);
  }
}

export class UpstreamTimeout extends Error {}

/** What the retry loop needs of a call: which model (its engine's servers), its signal, a LoRA adapter. */
export interface UpstreamCall {
  model: { id: string; engine: EngineConfig };
  signal: AbortSignal;
  adapter?: ChatProviderCall['adapter'];
}

/** The server does not know the LoRA adapter asked for (it restarted and lost it). */
export class AdapterNotLoaded extends ApiError {}

export function cancelled(): ApiError {
  return new ApiError('timeout', 'The request was cancelled');
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(cancelled());
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(cancelled());
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** What a non-2xx answer means for the attempt. */
export function refusal(endpoint: Endpoint, status: number, message: string, headers: UpstreamResponse['headers'], call: UpstreamCall, logger: Logger): AttemptError {
  if (status === 404 && call.adapter?.kind === 'lora')
    return new AttemptError('fatal', new AdapterNotLoaded('upstream_error', `The LoRA server does not have ${call.adapter.name} loaded (${endpoint.label}): ${message}`));
  const kind = statusFailureKind(status);
  // 529: Anthropic's "overloaded", the same saturation as a 429 (and retried like one).
  if (status === 429 || status === 529)
    return new AttemptError(kind, new ApiError('rate_limited', `${UPSTREAM_RATE_LIMITED}: ${message}`), retryAfter(headers));
  if (kind === 'retry')
    return new AttemptError(kind, new ApiError('upstream_error', `The model provider failed with HTTP ${status}: ${message}`), retryAfter(headers));
  if (kind === 'next') {
    logger.warn(`${endpoint.label} answered ${status}: ${message}`);
    return new AttemptError('next', new ApiError('upstream_error', `The model provider refused the request (HTTP ${status}); check its configuration`));
  }
  return new AttemptError('fatal', ApiError.badRequest(`The model provider rejected the request: ${message}`));
}

/**
 * Runs `attempt` against each endpoint in turn. `armTimer` (re)starts the attempt's
 * inactivity timeout: time to the response headers, then between stream events.
 */
export async function withFallbacks<T>(
  call: UpstreamCall,
  committed: () => boolean,
  attempt: (endpoint: Endpoint, signal: AbortSignal, armTimer: () => void) => Promise<T>,
  logger: Logger,
): Promise<T> {
  const engine = call.model.engine as OpenAiCompatibleEngineConfig;
  const policy = { maxRetries: engine.max_retries, backoffMs: engine.retry_backoff_ms };
  let last: AttemptError | undefined;
  for (const endpoint of endpointsOf(engine)) {
    for (let n = 0; ; n++) {
      if (call.signal.aborted) throw cancelled();
      const { controller, unlink } = abortFollowing(call.signal);
      const signal = controller.signal;
      const timer = setTimeout(() => controller.abort(new UpstreamTimeout()), endpoint.timeoutMs);
      const armTimer = () => void timer.refresh();
      try {
        return await attempt(endpoint, signal, armTimer);
      } catch (err) {
        // Frees the connection of a response that was not read to the end.
        controller.abort();
        if (call.signal.aborted) throw cancelled();
        const timedOut = controller.signal.aborted && controller.signal.reason instanceof UpstreamTimeout;
        last = timedOut
          ? new AttemptError(
              committed() ? 'fatal' : 'retry',
              new ApiError('timeout', `The model provider did not answer within ${endpoint.timeoutMs} ms (${endpoint.label})`),
            )
          : err instanceof AttemptError
            ? err
            : new AttemptError('fatal', new ApiError('upstream_error', `The model provider failed (${endpoint.label}): ${(err as Error).message}`));
        if (last.kind === 'fatal' || committed()) throw last.apiError;
        logger.warn(`${endpoint.label} attempt ${n + 1} failed: ${last.message}`);
        if (last.kind === 'next') break;
        const delay = retryDelayMs(policy, n, last.retryAfterMs);
        if (delay === undefined) break;
        await sleep(delay, call.signal);
      } finally {
        clearTimeout(timer);
        unlink();
      }
    }
  }
  throw (last ?? new AttemptError('fatal', new ApiError('upstream_error', 'No model provider is configured'))).apiError;
}
