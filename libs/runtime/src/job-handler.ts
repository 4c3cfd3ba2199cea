import { SetMetadata, applyDecorators, Injectable } from '@nestjs/common';
import type { PayloadOf, QueueContract, ResultOf } from '@atelier/contracts';

export const JOB_HANDLER_METADATA = 'atelier:job-handler';

/** What a handler may read of the job it runs (a BullMQ job, or a call on a request/response stream). */
export interface JobInfo {
  readonly id?: string;
  readonly data: unknown;
  /** When it was added (ms since the epoch, the adding process's clock). */
  readonly timestamp: number;
  readonly attemptsMade: number;
  readonly opts: { readonly attempts?: number };
  /** The trace of the request that made it (a call's stream entry field; work jobs carry it in their data). */
  readonly traceparent?: string;
}

export interface JobContext {
  readonly job: JobInfo;
  /** Aborted when the job is cancelled (DELETE, client disconnect) or the worker shuts down hard. */
  readonly signal: AbortSignal;
  /** 1-based attempt number. */
  readonly attempt: number;
  /** Request/response queues only: streams a partial result to the waiting caller. */
  sendChunk(chunk: unknown): Promise<void>;
  /**
   * Work queues only: puts the job back to run again in `delayMs` (keeping its priority), without
   * using up an attempt. Never returns: the handler's work for this delivery ends here.
   */
  defer(delayMs: number): Promise<never>;
}

export interface JobHandler<Q extends QueueContract> {
  handle(payload: PayloadOf<Q>, ctx: JobContext): Promise<ResultOf<Q>>;
}

/** Marks a provider as THE handler of a queue; WorkerHost refuses to start with zero or two. */
export function HandlesQueue(contract: QueueContract): ClassDecorator {
  return applyDecorators(Injectable(), SetMetadata(JOB_HANDLER_METADATA, contract));
}
