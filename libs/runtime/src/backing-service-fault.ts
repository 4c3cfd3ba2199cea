import { ApiError } from '@atelier/contracts';

export type BackingService = 'postgres' | 'redis';

/** Socket-level failures: whichever client raised them, the server is away, not the request wrong. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ECONNABORTED']);

/**
 * Prisma's own codes for an unreachable or vanished database, and SQLSTATEs that mean "the
 * server cannot serve right now": class 08 (connection exception), admin/crash shutdown and
 * start-up (57P01-57P03), too many connections (53300).
 */
const PRISMA_CODES = new Set(['P1001', 'P1002', 'P1008', 'P1017', 'P2024']);
const SQLSTATE = /^(08[0-9A-Z]{3}|57P0[1-3]|53300)$/;

const POSTGRES_MESSAGES = [
  /Code: `(08[0-9A-Z]{3}|57P0[1-3]|53300)`/,
  /terminating connection due to administrator command/,
  /the database system is (starting up|shutting down|in recovery|not yet accepting connections)/,
  /Connection terminated( unexpectedly| due to connection timeout)?/,
  /Client has encountered a connection error and is not queryable/,
  /Can't reach database server/,
  /Timed out fetching a new connection from the connection pool/,
  /Server has closed the connection/,
  /DatabaseNotReachable|ConnectionClosed/,
];

const REDIS_MESSAGES = [
  /Reached the max retries per request limit/,
  /Connection is closed\.?/,
  /Stream isn't writeable and enableOfflineQueue options is false/,
  /Connection in subscriber mode/,
  /LOADING Redis is loading the dataset in memory/,
  /Could not reach the job queue|The job queue \(Redis\) is temporarily unavailable/,
];

interface Inspectable {
  name?: unknown;
  code?: unknown;
  message?: unknown;
  cause?: unknown;
  meta?: unknown;
  errors?: unknown;
}

/**
 * Which backing service an error says is unavailable, or undefined when the error is anything
 * else (a bug, a bad request). Looks through causes and aggregated errors, since Prisma and
 * the pg pool wrap the driver's error.
 */
export function backingServiceFault(err: unknown, depth = 0): BackingService | undefined {
  if (!err || typeof err !== 'object' || depth > 4) return undefined;
  if (err instanceof ApiError) return err.type === 'service_unavailable' && /job queue/.test(err.message) ? 'redis' : undefined;
  const e = err as Inspectable;
  const name = typeof e.name === 'string' ? e.name : '';
  const code = typeof e.code === 'string' ? e.code : '';
  const message = typeof e.message === 'string' ? e.message : '';
  if (name === 'MaxRetriesPerRequestError' || REDIS_MESSAGES.some((r) => r.test(message))) return 'redis';
  if (PRISMA_CODES.has(code) || SQLSTATE.test(code) || POSTGRES_MESSAGES.some((r) => r.test(message))) return 'postgres';
  // ioredis turns its socket errors into MaxRetriesPerRequestError for callers, so a raw one
  // reaching a caller comes from the pg driver.
  if (SOCKET_CODES.has(code)) return /redis/i.test(message) ? 'redis' : 'postgres';
  for (const inner of [e.cause, (e.meta as { driverAdapterError?: unknown } | undefined)?.driverAdapterError, ...(Array.isArray(e.errors) ? e.errors : [])]) {
    const found = backingServiceFault(inner, depth + 1);
    if (found) return found;
  }
  return undefined;
}

/** Seconds a client is told to wait before retrying a request refused for an outage. */
export const OUTAGE_RETRY_AFTER_SECONDS = 2;

/** The 503 a request gets while a backing service it needs is away. */
export function outageError(service: BackingService): ApiError {
  const what = service === 'postgres' ? 'database' : 'job queue (Redis)';
  return new ApiError('service_unavailable', `The ${what} is temporarily unavailable; retry in a few seconds`);
}

export interface OutageRetryOptions {
  /** Give up (rethrow the last fault) after this long. */
  maxWaitMs: number;
  signal?: AbortSignal;
  /** Called once, on the first fault, so callers can log that they are waiting. */
  onWait?: (service: BackingService, err: unknown) => void;
}

/**
 * Runs `op` again while it fails because Postgres or Redis is away (backoff 100 ms doubling to
 * 2 s), for work that must not be lost to an outage: a terminal generation write, the charge of
 * a chat answer already delivered. Any other error is thrown at once. `op` must be idempotent;
 * the state machine and the ledger's conditional statements make every caller so.
 */
export async function retryThroughOutage<T>(op: () => Promise<T>, opts: OutageRetryOptions): Promise<T> {
  const deadline = Date.now() + opts.maxWaitMs;
  let delay = 100;
  let warned = false;
  for (;;) {
    try {
      return await op();
    } catch (err) {
      const service = backingServiceFault(err);
      if (!service || Date.now() + delay > deadline || opts.signal?.aborted) throw err;
      if (!warned) {
        warned = true;
        opts.onWait?.(service, err);
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 2_000);
    }
  }
}

/**
 * Runs `op` now; when it fails because a backing service is away, keeps retrying it in the
 * background (not awaited) and hands the result to `onLater`, if given. For work that must happen but must
 * not hold up an answer already given: the settle of a delivered chat answer or sync image.
 * Resolves with the result when it succeeded at once, undefined otherwise; any other error, or
 * an outage longer than `maxWaitMs`, goes to `onFailure`.
 */
export async function nowOrOnceBack<T>(
  op: () => Promise<T>,
  opts: Pick<OutageRetryOptions, 'maxWaitMs' | 'onWait'> & { onLater?: (value: T) => void; onFailure: (err: unknown) => void },
): Promise<T | undefined> {
  try {
    return await op();
  } catch (err) {
    if (!backingServiceFault(err)) opts.onFailure(err);
    else void retryThroughOutage(op, opts).then(opts.onLater, opts.onFailure);
    return undefined;
  }
}

/** Prisma wraps driver errors in multi-line invocation dumps; logs and health need the cause line. */
export function errorSummary(err: unknown): string {
  const lines = String((err as Error)?.message ?? err).split('\n').map((l) => l.trim()).filter(Boolean);
  return (lines.at(-1) ?? 'unknown error').slice(0, 200);
}
