import { AsyncLocalStorage } from 'node:async_hooks';
import type { Context, Span } from '@opentelemetry/api';

/** How much of a request's work is still going on, and when its response closed (its span's end then). */
export interface SpanHold {
  count: number;
  closedAt?: number;
  span?: Span;
}

export interface RequestContext {
  /** The gateway's request id (x-request-id), carried into jobs as CallerContext.requestId. */
  requestId: string;
  /** Set while a worker runs a job. */
  queue?: string;
  jobId?: string;
  /** The OpenTelemetry context of the work (its current span), when tracing is on. */
  otel?: Context;
  /** Work still going on for the request after its answer (tracing.hold), which its span waits for. */
  spanHold?: SpanHold;
}

const storage = new AsyncLocalStorage<RequestContext>();

/**
 * The request a piece of work belongs to, across awaits, so every log line it writes (in the
 * gateway, and in the service that runs its job) carries the same request id.
 */
export const requestContext = {
  run<T>(context: RequestContext, fn: () => T): T {
    return storage.run(context, fn);
  },
  current(): RequestContext | undefined {
    return storage.getStore();
  },
};
