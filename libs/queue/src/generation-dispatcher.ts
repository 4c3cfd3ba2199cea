import { Injectable, Logger } from '@nestjs/common';
import { IMAGE_GENERATION_QUEUE, VIDEO_GENERATION_QUEUE, type GenerationJob } from '@atelier/contracts';
import { requestContext } from '@atelier/observability';
import { backingServiceFault, GroupCommit, JobQueues } from '@atelier/runtime';
import { QueuePositions, type QueuePriority } from './queue-positions';

export function queueFor(mediaType: 'image' | 'video') {
  return mediaType === 'image' ? IMAGE_GENERATION_QUEUE : VIDEO_GENERATION_QUEUE;
}

export interface DispatchItem {
  id: string;
  mediaType: 'image' | 'video';
  namespaceId: string;
  priority: QueuePriority;
}

/**
 * Hands written generations to the workers: each takes its place in its pool's fair order, then
 * its BullMQ job (jobId = generation id, so a duplicate is harmless). Used by enqueue and by the
 * sweeper, which re-dispatches jobs a crash or a Redis outage lost.
 */
@Injectable()
export class GenerationDispatcher {
  private readonly logger = new Logger(GenerationDispatcher.name);
  /** Concurrent dispatches share one placement and one BullMQ addBulk per pool and batch. */
  private readonly adds = {
    image: this.jobAdder('image'),
    video: this.jobAdder('video'),
  };

  constructor(
    private readonly queues: JobQueues,
    private readonly positions: QueuePositions,
  ) {}

  /** Adds the jobs; duplicates are harmless (jobId = generation id), losses are re-dispatched. */
  async dispatch(items: DispatchItem[]): Promise<void> {
    for (const mediaType of ['image', 'video'] as const) {
      const batch = items.filter((i) => i.mediaType === mediaType);
      if (batch.length === 0) continue;
      // The enqueueing request's id follows the job into the worker's logs (re-dispatches have none).
      const requestId = requestContext.current()?.requestId;
      // The rows are already durable: with Redis away the enqueue still succeeds, and the
      // queue-worker's sweeper adds these jobs once Redis is back.
      await this.adds[mediaType]
        .submit(batch.map((i) => ({ payload: { generationId: i.id, requestId: requestId ?? i.id, namespaceId: i.namespaceId }, jobId: i.id, namespaceId: i.namespaceId, priority: i.priority })))
        .catch((err: Error) => {
          // During a Redis outage every enqueue lands here; the 503s elsewhere already say Redis is away.
          const log = backingServiceFault(err) ? 'debug' : 'warn';
          this.logger[log](`Could not add ${batch.length} job(s) now (${err.message}); the dispatcher will retry`);
        });
    }
  }

  private jobAdder(mediaType: 'image' | 'video') {
    type Jobs = { payload: GenerationJob; jobId: string; namespaceId: string; priority: QueuePriority }[];
    return new GroupCommit<Jobs, void>(async (batches) => {
      const jobs = batches.flat();
      // The place in the fair order first: it is the job's BullMQ priority, and it is there
      // before any worker can start the job and take it out again.
      const { priorities, moved } = await this.positions.add(
        mediaType,
        jobs.map((j) => ({ id: j.jobId, namespaceId: j.namespaceId, priority: j.priority })),
      );
      await this.queues.addBulk(
        queueFor(mediaType),
        jobs.map((j, i) => ({ payload: j.payload, jobId: j.jobId, priority: priorities[i] })),
      );
      // Outranked generations of the namespace moved one place on. A crash before this leaves
      // them in their old BullMQ order: each still runs once, only out of priority order.
      if (moved.length) await this.queues.changePriorities(queueFor(mediaType), moved.map((m) => ({ jobId: m.id, priority: m.priority })));
      return batches.map(() => undefined);
    });
  }
}
