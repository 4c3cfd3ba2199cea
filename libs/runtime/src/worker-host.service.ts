import { Inject, Injectable, Logger, Module, type DynamicModule, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { DiscoveryModule, DiscoveryService } from '@nestjs/core';
import { DelayedError, WaitingError, Worker, type Job } from 'bullmq';
import { ApiError, CANCEL_JOBS_CHANNEL, type QueueContract } from '@atelier/contracts';
import { ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { Metrics, requestContext, SpanKind, tracing, type RequestContext } from '@atelier/observability';
import { backingServiceFault, outageError } from './backing-service-fault';
import { BroadcastBus } from './broadcast-bus.service';
import { InFlightMap } from './in-flight-map';
import { loadLuaScript, luaCommand, RUNTIME_LUA } from './lua-script';
import { JOB_HANDLER_METADATA, type JobContext, type JobHandler, type JobInfo } from './job-handler';
import { RedisService } from './redis.module';
import type { RpcReply } from './rpc-messages';
import { RpcStreamConsumer, sendFinalReply, type RpcCallJob } from './rpc-stream-consumer';

const PUBLISH_ON_SHARD = loadLuaScript(RUNTIME_LUA, 'publish-on-shard-1.lua');

export const WORKER_HOST_OPTIONS = Symbol('WORKER_HOST_OPTIONS');
export interface WorkerHostOptions {
  /** The queues this process consumes; each needs exactly one @HandlesQueue provider. */
  consumes: readonly QueueContract[];
  shutdownTimeoutMs: number;
  /** Overrides each contract's lock duration (and the stalled-job check with it). */
  lockDurationMs?: number;
  /** Jobs of a queue one process runs at once, by queue name, where a setting overrides the contract's (BATCH_WORKER_CONCURRENCY). */
  concurrency?: Readonly<Record<string, number>>;
}

export class HandlerWiringError extends Error {}

/** Pairs handlers with the queues an app consumes; throws listing every mismatch. */
export function matchHandlers(
  consumes: readonly QueueContract[],
  handlers: { contract: QueueContract; instance: unknown; className: string }[],
): Map<string, unknown> {
  const problems: string[] = [];
  const byQueue = new Map<string, typeof handlers>();
  for (const h of handlers) {
    const list = byQueue.get(h.contract.name) ?? [];
    list.push(h);
    byQueue.set(h.contract.name, list);
  }
  const result = new Map<string, unknown>();
  for (const contract of consumes) {
    const list = byQueue.get(contract.name) ?? [];
    if (list.length === 0) problems.push(`queue "${contract.name}" is consumed but has no @HandlesQueue handler`);
    else if (list.length > 1)
      problems.push(`queue "${contract.name}" has ${list.length} handlers (${list.map((h) => h.className).join(', ')}); exactly one is allowed`);
    else result.set(contract.name, list[0].instance);
  }
  for (const [name, list] of byQueue) {
    if (!consumes.some((c) => c.name === name))
      problems.push(`handler ${list.map((h) => h.className).join(', ')} for queue "${name}" is not in this app's consumes list`);
  }
  if (problems.length) throw new HandlerWiringError(`Job handler wiring is wrong:\n  - ${problems.join('\n  - ')}`);
  return result;
}

/**
 * Runs the BullMQ workers of one app. Competing consumers: every replica takes jobs from the
 * same queues, each job goes to exactly one of them.
 */
@Injectable()
export class WorkerHost implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(WorkerHost.name);
  private readonly workers: Worker[] = [];
  /** Request/response queues run on Redis streams (see RpcStreamConsumer), work queues on BullMQ. */
  private readonly consumers: RpcStreamConsumer[] = [];
  private readonly active = new InFlightMap<string, AbortController>();
  /** Set when shutdown aborts the jobs still running: they go back to the queue, not to completed. */
  private handingBack = false;
  private unsubscribe?: () => Promise<void>;

  constructor(
    @Inject(WORKER_HOST_OPTIONS) private readonly options: WorkerHostOptions,
    private readonly discovery: DiscoveryService,
    private readonly redis: RedisService,
    private readonly bus: BroadcastBus,
    private readonly metrics: Metrics,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const handlers = this.discovery
      .getProviders()
      .filter((w) => w.metatype && w.instance && Reflect.getMetadata(JOB_HANDLER_METADATA, w.metatype))
      .map((w) => ({
        contract: Reflect.getMetadata(JOB_HANDLER_METADATA, w.metatype!) as QueueContract,
        instance: w.instance as unknown,
        className: w.metatype!.name,
      }));
    const matched = matchHandlers(this.options.consumes, handlers);
    if (this.options.consumes.length === 0) return;

    this.unsubscribe = await this.bus.subscribe(CANCEL_JOBS_CHANNEL, (event) => {
      for (const id of event.jobIds) this.active.get(`${event.queue}:${id}`)?.abort(new Error(event.reason));
    });
    for (const contract of this.options.consumes) {
      const handler = matched.get(contract.name) as JobHandler<QueueContract>;
      if (contract.settings.kind === 'rpc') {
        // One consumer per stream of the queue, sharing the process's concurrency between them.
        const shards = this.redis.names.rpcShards;
        for (let shard = 0; shard < shards; shard++) {
          const consumer = new RpcStreamConsumer(
            this.redis,
            contract,
            this.options.lockDurationMs ?? contract.settings.lockDurationMs,
            (job) => this.runInContext(contract, handler, job, undefined),
            this.logger,
            shard,
            Math.ceil(contract.settings.concurrency / shards),
          );
          consumer.start();
          this.consumers.push(consumer);
        }
      } else this.workers.push(this.startWorker(contract, handler));
    }
    this.logger.log(`Consuming ${this.options.consumes.map((c) => c.name).join(', ')}`);
  }

  private startWorker(contract: QueueContract, handler: JobHandler<QueueContract>): Worker {
    const worker = new Worker(
      contract.name,
      (job: Job, token?: string) => this.runInContext(contract, handler, job, token),
      {
        connection: this.redis.bullConnection(`worker:${contract.name}`, true),
        prefix: this.redis.names.bullPrefix(contract.name),
        concurrency: this.options.concurrency?.[contract.name] ?? contract.settings.concurrency,
        lockDuration: this.options.lockDurationMs ?? contract.settings.lockDurationMs,
        ...(this.options.lockDurationMs ? { stalledInterval: this.options.lockDurationMs } : {}),
      },
    );
    // While Redis is away every reconnect attempt errors; one line per worker every 10 s says it.
    let lastLogged = 0;
    let suppressed = 0;
    worker.on('error', (err) => {
      const now = Date.now();
      if (now - lastLogged < 10_000) {
        suppressed++;
        return;
      }
      this.logger.warn(`${contract.name} worker: ${err.message}${suppressed ? ` (${suppressed} similar errors not shown)` : ''}`);
      lastLogged = now;
      suppressed = 0;
    });
    return worker;
  }

  /**
   * Each job runs in the context of the request that caused it, so every log line written while
   * handling it carries the gateway's request id (CallerContext.requestId or the job's own).
   */
  private runInContext(contract: QueueContract, handler: JobHandler<QueueContract>, job: JobInfo, token: string | undefined): Promise<unknown> {
    const context: RequestContext = { requestId: jobRequestId(job), queue: contract.name, jobId: String(job.id) };
    if (!tracing.on) return requestContext.run(context, () => this.run(contract, handler, job, token));
    // The job's span continues the request that made it: a child of the caller's span for a
    // call, and for a work job (which may run long after, and be retried) a new trace linked to it.
    const traceparent = jobTraceparent(job);
    const parent = traceparent ? tracing.extract({ traceparent }) : undefined;
    const linked = contract.settings.kind === 'work' && parent;
    const span = tracing.startSpan(
      `${contract.name} process`,
      {
        kind: SpanKind.CONSUMER,
        attributes: { 'messaging.system': contract.settings.kind === 'rpc' ? 'redis_streams' : 'bullmq', 'messaging.destination.name': contract.name, 'messaging.message.id': String(job.id), 'atelier.attempt': job.attemptsMade + 1 },
        ...(linked && { links: [{ context: trace.getSpanContext(parent)! }] }),
      },
      linked ? ROOT_CONTEXT : (parent ?? ROOT_CONTEXT),
    )!;
    context.otel = trace.setSpan(ROOT_CONTEXT, span);
    return requestContext.run(context, () => this.run(contract, handler, job, token)).then(
      (result) => {
        span.end();
        return result;
      },
      (err: unknown) => {
        if (!(err instanceof DelayedError || err instanceof WaitingError)) tracing.failed(err, span);
        span.end();
        throw err;
      },
    );
  }

  private async run(contract: QueueContract, handler: JobHandler<QueueContract>, job: JobInfo, token: string | undefined): Promise<unknown> {
    const rpc = contract.settings.kind === 'rpc';
    const key = `${contract.name}:${job.id}`;
    const controller = new AbortController();
    this.active.set(key, controller);
    const ctx: JobContext = {
      job,
      signal: controller.signal,
      attempt: job.attemptsMade + 1,
      sendChunk: async (data) => {
        if (rpc) await this.reply(contract, job, { kind: 'chunk', data });
      },
      defer: async (delayMs) => {
        if (contract.settings.kind !== 'work') throw new Error(`${contract.name}: only work jobs can be deferred`);
        await (job as Job).moveToDelayed(Date.now() + delayMs, token);
        throw new DelayedError();
      },
    };
    // Job timestamps are the adding process's clock: across machines this includes their skew.
    this.metrics.jobWait.observe({ queue: contract.name }, Math.max(0, Date.now() - job.timestamp) / 1000);
    const timer = this.metrics.jobDuration.startTimer({ queue: contract.name });
    const started = performance.now();
    try {
      const result = await handler.handle(job.data, ctx).catch(async (err: unknown) => {
        await this.handBackIfStopping(contract, job, token, controller.signal);
        throw err;
      });
      await this.handBackIfStopping(contract, job, token, controller.signal);
      if (rpc) await this.reply(contract, job, { kind: 'result', data: result });
      timer({ outcome: 'completed' });
      this.logger.log(`job completed in ${Math.round(performance.now() - started)} ms`);
      return result;
    } catch (err) {
      if (err instanceof WaitingError) {
        this.logger.log('job handed back to the queue: this worker is shutting down');
        throw err;
      }
      if (err instanceof DelayedError) {
        timer({ outcome: 'deferred' });
        throw err;
      }
      timer({ outcome: 'failed' });
      const finalAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
      if (rpc && finalAttempt) await this.reply(contract, job, { kind: 'error', error: toReplyError(err) });
      if (err instanceof ApiError) this.logger.log(`job failed in ${Math.round(performance.now() - started)} ms: ${err.message}`);
      else this.logger.error(`${contract.name} job ${job.id} failed: ${(err as Error).stack ?? err}`);
      throw err;
    } finally {
      this.active.delete(key);
    }
  }

  /**
   * A work job whose handler was aborted by shutdown (not by a cancel) goes back to the waiting
   * list for another replica, without using up an attempt. BullMQ leaves a job that throws
   * WaitingError alone. Request/response jobs are not re-run: their caller may already have
   * received chunks; they fail and the caller is told.
   */
  private async handBackIfStopping(contract: QueueContract, job: JobInfo, token: string | undefined, signal: AbortSignal): Promise<void> {
    if (!this.handingBack || !signal.aborted || contract.settings.kind !== 'work') return;
    // Work queues run on BullMQ, so this is a BullMQ job.
    await (job as Job).moveToWait(token);
    throw new WaitingError();
  }

  /** Chunks are only published; the final reply also acknowledges the call (sendFinalReply). */
  private async reply(contract: QueueContract, job: JobInfo, message: RpcReply): Promise<void> {
    const id = String(job.id);
    const shard = isStreamCall(job) ? job.shard : 0;
    if (message.kind === 'chunk') {
      if (this.redis.clustered) await luaCommand(this.redis.client, PUBLISH_ON_SHARD)(this.redis.names.rpcStream(contract.name, shard), this.redis.names.rpcReply(id), JSON.stringify(message));
      else await this.redis.client.publish(this.redis.names.rpcReply(id), JSON.stringify(message));
      return;
    }
    await sendFinalReply(this.redis, contract, id, message, {
      entryId: isStreamCall(job) ? job.acknowledgement() : undefined,
      shard,
      failure: message.kind === 'error' ? { requestId: jobRequestId(job) } : undefined,
    });
  }

  /**
   * Stops taking jobs and lets active ones finish; after the timeout they are aborted and work
   * jobs are moved back to the waiting list for another replica (a handler that ignores its
   * signal is abandoned, and BullMQ's stalled-job check hands its job over instead).
   *
   * Runs in onModuleDestroy of WorkerHostModule (a non-global module), which Nest destroys
   * before the global ones: finishing jobs still have Postgres (closed in DbModule's
   * onModuleDestroy) and Redis (closed in RedisService's onApplicationShutdown) to complete
   * their work and publish their replies.
   */
  async onModuleDestroy(): Promise<void> {
    await this.unsubscribe?.();
    if (this.workers.length === 0 && this.consumers.length === 0) return;
    const abortActive = (reason: string) => {
      for (const c of this.active.values()) c.abort(new Error(reason));
    };
    // Without Redis no job can be completed, and BullMQ's graceful close waits for a connection
    // that never comes: it would hang forever. A forced close only drops the connections.
    if (this.redis.client.status !== 'ready') {
      abortActive('worker shutting down');
      await Promise.all([
        ...this.workers.map((w) => w.close(true).catch(() => undefined)),
        ...this.consumers.map((c) => settlesWithin(c.close(), 1_000)),
      ]);
      return;
    }
    const graceful = Promise.all([...this.workers.map((w) => w.close().catch(() => undefined)), ...this.consumers.map((c) => c.close())]);
    if (await settlesWithin(graceful, this.options.shutdownTimeoutMs)) return;
    this.handingBack = true;
    abortActive('worker shutting down');
    // Handlers that honour their signal end now and the graceful close completes. close(true)
    // cannot help here (BullMQ returns the close already under way), so any job still running
    // after a short grace is cut off by dropping the connections.
    if (await settlesWithin(graceful, 1_000)) return;
    this.logger.warn('Jobs still running after the shutdown timeout; abandoning them');
    await settlesWithin(Promise.all(this.workers.map((w) => w.disconnect().catch(() => undefined))), 1_000);
  }
}

function isStreamCall(job: JobInfo): job is RpcCallJob {
  return typeof (job as Partial<RpcCallJob>).acknowledgement === 'function';
}

/** The originating request's id: CallerContext.requestId (rpc jobs) or the job's own requestId. */
function jobTraceparent(job: JobInfo): string | undefined {
  if (job.traceparent) return job.traceparent;
  const carried = (job.data as { traceparent?: unknown } | null)?.traceparent;
  return typeof carried === 'string' ? carried : undefined;
}

function jobRequestId(job: JobInfo): string {
  const data = (job.data ?? {}) as { requestId?: unknown; caller?: { requestId?: unknown } };
  const id = data.caller?.requestId ?? data.requestId;
  return typeof id === 'string' && id ? id : `job-${job.id}`;
}

function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise.then(() => true),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

function toReplyError(err: unknown): Extract<RpcReply, { kind: 'error' }>['error'] {
  if (err instanceof ApiError) return { type: err.type, message: err.message, detail: err.detail };
  const outage = backingServiceFault(err);
  if (outage) return { type: 'service_unavailable', message: outageError(outage).message };
  return { type: 'internal_error', message: 'The service failed to process the request' };
}

/**
 * Deliberately not global (unlike the rest of the runtime): Nest destroys non-global modules
 * first, so the workers drain while Postgres and Redis are still open.
 */
@Module({})
export class WorkerHostModule {
  static forRoot(options: WorkerHostOptions): DynamicModule {
    return {
      module: WorkerHostModule,
      imports: [DiscoveryModule],
      providers: [{ provide: WORKER_HOST_OPTIONS, useValue: options }, WorkerHost],
      exports: [WorkerHost],
    };
  }
}
