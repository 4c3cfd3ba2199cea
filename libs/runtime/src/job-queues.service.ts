import { Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { Job, Queue, type JobsOptions } from 'bullmq';
import type { PayloadOf, QueueContract, QueueSettings } from '@atelier/contracts';
import { tracing } from '@atelier/observability';
import { RedisService } from './redis.module';

export function defaultJobOptions(settings: QueueSettings): JobsOptions {
  return {
    attempts: settings.attempts,
    backoff: { ...settings.backoff },
    removeOnComplete: { ...settings.removeOnComplete },
    removeOnFail: { ...settings.removeOnFail },
  };
}

/**
 * A work job's payload with the trace of the request that adds it (`traceparent`, beside the
 * contract's fields; WorkerHost reads it), so its processing links back to that request. The
 * payload as it is when tracing is off, or outside a traced request.
 */
function traced<T>(payload: T): T {
  if (!tracing.on) return payload;
  const { traceparent } = tracing.inject();
  return traceparent ? { ...payload, traceparent } : payload;
}

/** Producer side of every queue contract: typed `add`, one BullMQ Queue per contract. */
@Injectable()
export class JobQueues implements OnApplicationShutdown {
  private readonly queues = new Map<string, Queue>();

  constructor(private readonly redis: RedisService) {}

  queue(contract: QueueContract): Queue {
    let queue = this.queues.get(contract.name);
    if (!queue) {
      queue = new Queue(contract.name, {
        connection: this.redis.bullConnection(`queue:${contract.name}`, false),
        prefix: this.redis.names.bullPrefix(contract.name),
        defaultJobOptions: defaultJobOptions(contract.settings),
      });
      queue.on('error', () => undefined);
      this.queues.set(contract.name, queue);
    }
    return queue;
  }

  async add<Q extends QueueContract>(
    contract: Q,
    payload: PayloadOf<Q>,
    opts: Pick<JobsOptions, 'jobId' | 'delay' | 'priority'> = {},
  ): Promise<Job> {
    this.redis.assertAvailable();
    return this.queue(contract).add(contract.name, traced(payload), opts);
  }

  /** Several jobs of one contract in one round trip (MULTI); jobIds make re-adding harmless. */
  async addBulk<Q extends QueueContract>(contract: Q, jobs: { payload: PayloadOf<Q>; jobId: string; priority?: number }[]): Promise<Job[]> {
    this.redis.assertAvailable();
    return this.queue(contract).addBulk(
      jobs.map((j) => ({ name: contract.name, data: traced(j.payload), opts: j.priority === undefined ? { jobId: j.jobId } : { jobId: j.jobId, priority: j.priority } })),
    );
  }

  /** New priorities for waiting jobs (a job already started or gone is left as it is). */
  async changePriorities(contract: QueueContract, jobs: { jobId: string; priority: number }[]): Promise<void> {
    this.redis.assertAvailable();
    const queue = this.queue(contract);
    // A Job built locally (no read of the job first): changePriority needs only the queue and id.
    await Promise.all(jobs.map((j) => new Job(queue, contract.name, undefined, {}, j.jobId).changePriority({ priority: j.priority })));
  }

  /**
   * Best effort: takes a waiting job off its queue. Without Redis it returns at once (BullMQ
   * would wait for the connection); callers only use it where the job, if it still runs, finds
   * its work cancelled and does nothing.
   */
  async remove(contract: QueueContract, jobId: string): Promise<void> {
    if (!this.redis.available()) return;
    await this.queue(contract)
      .remove(jobId)
      .catch(() => undefined);
  }

  async onApplicationShutdown(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close().catch(() => undefined)));
  }
}
