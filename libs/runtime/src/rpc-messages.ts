import type { ErrorType } from '@atelier/contracts';

/** Messages on a request's private reply channel, from the worker back to the waiting caller. */
export type RpcReply =
  | { kind: 'chunk'; data: unknown }
  | { kind: 'result'; data: unknown }
  | { kind: 'error'; error: { type: ErrorType; message: string; detail?: unknown } };
