import { AsyncLocalStorage } from 'node:async_hooks';
import type { Context } from '@opentelemetry/api';

export interface RequestContext {
  /** The gateway's request id (x-request-id), carried into jobs as CallerContext.requestId. */
  requestId: string;
  /** Set while a worker runs a job. */
  queue?: string;
  jobId?: string;
  /** The OpenTelemetry context of the work (its current span), when tracing is on. */
  otel?: Context;
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
