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
 * How long each final reply is kept for a caller whose reply connection dropped. The last read
 * of a reply published while the connection was down comes at most REPLY_CONNECTION_GRACE_MS
 * plus the last read delay after it; three times that leaves room for a connection that drops
 * again during the recovery. Every reply is kept, so this bounds what they hold in Redis: kept
 * two minutes, 4,000 chat requests/s held about 480,000 of them (about 350 MB).
 */
export const KEPT_REPLY_SECONDS = Math.ceil((3 * (REPLY_CONNECTION_GRACE_MS + KEPT_REPLY_READS_MS[KEPT_REPLY_READS_MS.length - 1])) / 1000);
