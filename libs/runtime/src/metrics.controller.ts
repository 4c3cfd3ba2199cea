import { createHash, timingSafeEqual } from 'node:crypto';
import { Controller, Get, Headers, Inject, Injectable, type OnModuleDestroy, type OnModuleInit, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ApiError, QUEUES, type QueueContract } from '@atelier/contracts';
import { Metrics } from '@atelier/observability';
import { PublicRoute } from './access-metadata';
import { JobQueues } from './job-queues.service';
import { RedisService } from './redis.module';
import { rpcQueueDepth } from './rpc-stream-consumer';

/** The queues whose depth this app reports; empty for all (ServiceRuntimeOptions.consumes, reportsAllQueues). */
export const CONSUMED_QUEUES = Symbol('CONSUMED_QUEUES');

const QUEUE_STATES = ['waiting', 'active', 'delayed', 'failed'] as const;
/**
 * BullMQ keeps jobs added with a priority (every queued generation: its place in the fair order)
 * in a set of their own; to an operator they are waiting like the others.
 */
const BULLMQ_STATES = [...QUEUE_STATES, 'prioritized'] as const;
/** A scrape must answer even when Redis does not. */
const QUEUE_READ_TIMEOUT_MS = 1000;

/**
 * Queue depth at scrape time: a worker app reports the queues it consumes; an app that consumes
 * none (the gateway, events) reports every queue, so one scrape target shows the whole backlog.
 */
@Injectable()
export class QueueDepthMetrics implements OnModuleInit, OnModuleDestroy {
  private unregister?: () => void;

  constructor(
    private readonly metrics: Metrics,
    private readonly queues: JobQueues,
    private readonly redis: RedisService,
    @Inject(CONSUMED_QUEUES) private readonly consumes: readonly QueueContract[],
  ) {}

  onModuleInit(): void {
    const watched: readonly QueueContract[] = this.consumes.length > 0 ? this.consumes : QUEUES;
    this.unregister = this.metrics.addCollector(async () => {
      this.metrics.queueJobs.reset();
      await Promise.all(
        watched.map(async (contract) => {
          let timer: NodeJS.Timeout | undefined;
          const counts = await Promise.race([
            contract.settings.kind === 'rpc'
              ? Promise.all(Array.from({ length: this.redis.names.rpcShards }, (_, shard) => rpcQueueDepth(this.redis.client, this.redis.names.rpcStream(contract.name, shard)))).then(
                  (depths): Record<string, number> => ({ waiting: depths.reduce((n, d) => n + d.waiting, 0), active: depths.reduce((n, d) => n + d.active, 0) }),
                )
              : this.queues
                  .queue(contract)
                  .getJobCounts(...BULLMQ_STATES)
                  .then((c): Record<string, number> => ({ ...c, waiting: (c.waiting ?? 0) + (c.prioritized ?? 0) })),
            new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), QUEUE_READ_TIMEOUT_MS))),
          ])
            .catch(() => undefined)
            .finally(() => clearTimeout(timer));
          if (!counts) return;
          for (const state of QUEUE_STATES) this.metrics.queueJobs.set({ queue: contract.name, state }, counts[state] ?? 0);
        }),
      );
    });
  }

  onModuleDestroy(): void {
    this.unregister?.();
  }
}

/** Whether a scrape may read the metrics: always without METRICS_TOKEN, else only with it. */
export function metricsAuthorized(config: AppConfig, authorization: string | undefined): boolean {
  const token = config.METRICS_TOKEN;
  return !token || sameSecret(/^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1] ?? '', token);
}

/**
 * GET /metrics (Prometheus text format) on every app's own port, unless METRICS_PORT serves them
 * apart; behind METRICS_TOKEN when one is set.
 */
@PublicRoute()
@Controller()
export class MetricsController {
  constructor(
    private readonly metrics: Metrics,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  @Get('metrics')
  async scrape(@Headers('authorization') authorization: string | undefined, @Res() reply: FastifyReply): Promise<void> {
    if (this.config.METRICS_PORT !== undefined) throw new ApiError('route_not_found', 'Cannot GET /metrics');
    if (!metricsAuthorized(this.config, authorization)) throw ApiError.unauthorized('Metrics need "Authorization: Bearer <METRICS_TOKEN>"');
    const { contentType, body } = await this.metrics.scrape();
    await reply.header('content-type', contentType).header('cache-control', 'no-store').send(body);
  }
}

/** Compares digests, so neither the time taken nor an early length check tells the token's length. */
function sameSecret(given: string, expected: string): boolean {
  const digest = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(given), digest(expected));
}
