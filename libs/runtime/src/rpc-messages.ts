import type { ErrorType } from '@atelier/contracts';

/** Messages on a request's private reply channel, from the worker back to the waiting caller. */
export type RpcReply =
  | { kind: 'chunk'; data: unknown }
  | { kind: 'result'; data: unknown }
  | { kind: 'error'; error: { type: ErrorType; message: string; detail?: unknown } };

/** How long calls in flight wait for a dropped reply connection to come back before they fail with 503. */
export const REPLY_CONNECTION_GRACE_MS = 2_000;

/**
 * After a dropped reply connection is back, the calls still waiting read their kept replies this
 * long after, twice: a worker may still be retrying its publish just after the reconnect.
 */
export const KEPT_REPLY_READS_MS = [500, 5_000] as const;

/**
 * The oldest a reply published while the caller's reply connection was down can be when the
 * caller reads it: the connection is back within REPLY_CONNECTION_GRACE_MS (or the call has
 * already failed), and the last read comes that long after.
 */
export const OLDEST_KEPT_REPLY_READ_MS = REPLY_CONNECTION_GRACE_MS + KEPT_REPLY_READS_MS[KEPT_REPLY_READS_MS.length - 1];

/**
 * How long each final reply is kept for a caller whose reply connection dropped: three times
 * OLDEST_KEPT_REPLY_READ_MS, which leaves room for a connection that drops again during the
 * recovery. Every reply is kept, so this bounds what they hold in Redis: kept two minutes, 4,000
 * chat requests/s held about 480,000 of them (about 350 MB).
 */
export const KEPT_REPLY_SECONDS = Math.ceil((3 * OLDEST_KEPT_REPLY_READ_MS) / 1000);
