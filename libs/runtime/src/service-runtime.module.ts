import { Module, type DynamicModule } from '@nestjs/common';
import { ConfigModule, type AppConfig } from '@atelier/config';
import type { QueueContract } from '@atelier/contracts';
import { DbModule } from '@atelier/db';
import { Metrics } from '@atelier/observability';
import { BroadcastBus } from './broadcast-bus.service';
import { HealthChecks, HealthController, LivenessController, SERVICE_NAME } from './health';
import { JobQueues } from './job-queues.service';
import { CONSUMED_QUEUES, MetricsController, QueueDepthMetrics } from './metrics.controller';
import { RedisModule } from './redis.module';
import { ClusterSweeps } from './cluster-sweeps.service';
import { RpcClient } from './rpc-client.service';
import { WorkerHostModule } from './worker-host.service';
import { UserEventLog } from './user-event-log.service';
import { RateLimiter } from './rate-limiter.service';
import { ConcurrencyLimiter } from './concurrency-limiter.service';

export interface ServiceRuntimeOptions {
  service: string;
  config: AppConfig;
  /** Queues this app consumes; each needs exactly one @HandlesQueue provider somewhere in the app. */
  consumes?: readonly QueueContract[];
  /**
   * /metrics reports the depth of every queue, not only those consumed here: the scrape target
   * that shows the whole backlog (the gateway). Apps that consume nothing do so anyway.
   */
  reportsAllQueues?: boolean;
  /** Per-queue concurrency set by the app's config, over the contracts' (WorkerHostOptions.concurrency). */
  concurrency?: Readonly<Record<string, number>>;
}

/** What every atelier app shares: config, Postgres, Redis, queues, broadcasts, workers, health, metrics. */
@Module({})
export class ServiceRuntimeModule {
  static forRoot(options: ServiceRuntimeOptions): DynamicModule {
    return {
      module: ServiceRuntimeModule,
      global: true,
      imports: [
        ConfigModule.forRoot(options.config),
        DbModule,
        RedisModule,
        WorkerHostModule.forRoot({
          consumes: options.consumes ?? [],
          shutdownTimeoutMs: options.config.SHUTDOWN_TIMEOUT_MS,
          lockDurationMs: options.config.JOB_LOCK_DURATION_MS,
          concurrency: options.concurrency,
        }),
      ],
      controllers: [HealthController, LivenessController, MetricsController],
      providers: [
        { provide: SERVICE_NAME, useValue: options.service },
        { provide: CONSUMED_QUEUES, useValue: options.reportsAllQueues ? [] : (options.consumes ?? []) },
        // One registry per app instance, so apps sharing a process (tests) keep their own numbers.
        { provide: Metrics, useFactory: () => new Metrics(options.service) },
        QueueDepthMetrics,
        HealthChecks,
        BroadcastBus,
        JobQueues,
        RpcClient,
        UserEventLog,
        RateLimiter,
        ConcurrencyLimiter,
        ClusterSweeps,
      ],
      exports: [SERVICE_NAME, Metrics, HealthChecks, BroadcastBus, JobQueues, RpcClient, UserEventLog, RateLimiter, ConcurrencyLimiter, ClusterSweeps],
    };
  }
}
