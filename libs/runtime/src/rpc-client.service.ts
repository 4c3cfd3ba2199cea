import { randomUUID } from 'node:crypto';
import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { ApiError, CANCEL_JOBS_CHANNEL, type PayloadOf, type QueueContract, type ResultOf } from '@atelier/contracts';
import { tracing } from '@atelier/observability';
import { outageError } from './backing-service-fault';
import { BroadcastBus } from './broadcast-bus.service';
import { GroupCommit } from './group-commit';
import { InFlightMap } from './in-flight-map';
import { closeRedis, isCluster, type RedisClient } from './redis-connection';
import { loadLuaScript, luaCommand, RUNTIME_LUA } from './lua-script';
import { RedisService } from './redis.module';
import { KEPT_REPLY_READS_MS, REPLY_CONNECTION_GRACE_MS, type RpcReply } from './rpc-messages';

/** Trimming only bounds a backlog nobody consumes; handled calls are deleted when done. */
const CALL_STREAM_MAXLEN = 100_000;

/** Adds calls to a call stream, returning their entry ids in order (its keys and arguments: the file's header). */
const ADD_CALLS = loadLuaScript(RUNTIME_LUA, 'rpc-add-calls-1.lua');

export interface RpcCallOptions {
  timeoutMs?: number;
  /** Aborting (client went away) cancels the job wherever it runs. */
  signal?: AbortSignal;
  onChunk?: (chunk: unknown) => void;
}

interface Pending {
  contract: QueueContract;
  jobId: string;
  /** Which of the queue's streams it went on. */
  shard: number;
  /** The call's stream entry, once it was added. */
  entryId: () => string | undefined;
  onReply: (reply: RpcReply) => void;
  /** Ends the call without a reply (this process is shutting down). */
  abandon: (err: ApiError) => void;
}

/**
 * Request/response over a Redis stream with a consumer group (RpcStreamConsumer): each call goes
 * to exactly one consumer (unlike Nest's Redis transport, which would deliver it to every
 * replica), and the answer comes back on a per-request pub/sub channel the caller subscribes to
 * before adding the call. One XADD per call, where a BullMQ job costs several scripts; calls
 * made together share one script call (callsOf).
 */
@Injectable()
export class RpcClient implements OnApplicationShutdown {
  private readonly logger = new Logger(RpcClient.name);
  private subscriber?: RedisClient;
  /** Resolves once this process listens on all of its reply channels (one pattern subscription). */
  private subscribed?: Promise<unknown>;
  private readonly pending = new InFlightMap<string, Pending>();
  private readonly adds = new Map<string, GroupCommit<{ jobId: string; data: string; traceparent: string }, string>>();
  /**
   * Job ids start with this process's id, so every reply channel of this process matches one
   * pattern: subscribing once replaces a SUBSCRIBE and an UNSUBSCRIBE per call.
   */
  private readonly instance = randomUUID().slice(0, 13);
  private nextShard = 0;

  constructor(
    private readonly redis: RedisService,
    private readonly bus: BroadcastBus,
  ) {}

  async call<Q extends QueueContract>(contract: Q, payload: PayloadOf<Q>, opts: RpcCallOptions = {}): Promise<ResultOf<Q>> {
    if (contract.settings.kind !== 'rpc') throw new Error(`queue ${contract.name} is not a request/response queue`);
    this.redis.assertAvailable();
    const jobId = `${this.instance}-${randomUUID()}`;
    const channel = this.redis.names.rpcReply(jobId);
    const timeoutMs = opts.timeoutMs ?? this.redis.config.RPC_TIMEOUT_MS;

    // The queue's streams take turns (in a Redis Cluster each is on its own shard).
    const shard = this.nextShard++ % this.redis.names.rpcShards;
    const stream = this.redis.names.rpcStream(contract.name, shard);
    // The consumer's span continues the caller's (its request's, or its job's).
    const traceparent = tracing.on ? (tracing.inject().traceparent ?? '') : '';

    return new Promise<ResultOf<Q>>((resolve, reject) => {
      let settled = false;
      let entryId: string | undefined;
      let cancelled = false;
      const finish = (fn: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        opts.signal?.removeEventListener('abort', onAbort);
        this.pending.delete(channel);
        fn();
      };
      const cancelJob = (reason: string) => {
        void this.bus.publish(CANCEL_JOBS_CHANNEL, { queue: contract.name, jobIds: [jobId], reason }).catch(() => undefined);
        // Not read yet: deleting the entry means no consumer ever starts it.
        if (entryId) void this.redis.client.xdel(stream, entryId).catch(() => undefined);
        else cancelled = true;
      };
      const timer = setTimeout(() => {
        cancelJob('timed out');
        finish(() => reject(new ApiError('timeout', `The ${contract.name} service did not answer within ${timeoutMs} ms`)));
      }, timeoutMs);
      const onAbort = () => {
        cancelJob('caller went away');
        finish(() => reject(new ApiError('timeout', 'The request was cancelled')));
      };
      if (opts.signal?.aborted) return onAbort();
      opts.signal?.addEventListener('abort', onAbort, { once: true });

      this.pending.set(channel, {
        contract,
        jobId,
        shard,
        entryId: () => entryId,
        onReply: (reply) => {
          if (reply.kind === 'chunk') return opts.onChunk?.(reply.data);
          if (reply.kind === 'result') return finish(() => resolve(reply.data as ResultOf<Q>));
          finish(() => reject(new ApiError(reply.error.type, reply.error.message, reply.error.detail)));
        },
        abandon: (err) => finish(() => reject(err)),
      });
      this.ensureSubscribed()
        .then(async () => {
          if (settled) return;
          entryId = await this.callsOf(stream).submit({ jobId, data: JSON.stringify(payload), traceparent });
          if (cancelled && entryId) await this.redis.client.xdel(stream, entryId);
        })
        .catch((err: Error) => {
          // The client library's words (ioredis: "Reached the max retries per request limit ...")
          // go to the log; the caller gets one sentence to act on.
          this.logger.warn(`Could not submit a ${contract.name} job: ${err.message}`);
          finish(() => reject(outageError('redis')));
        });
    });
  }

  /**
   * The calls added to one stream, group-committed: alone, a call is added at once; calls made
   * while an add is in flight go together in the next one (one script, one Redis wake-up).
   */
  private callsOf(stream: string): GroupCommit<{ jobId: string; data: string; traceparent: string }, string> {
    let adds = this.adds.get(stream);
    if (!adds) {
      const script = luaCommand<string[]>(this.redis.client, ADD_CALLS);
      adds = new GroupCommit((calls) => script(stream, CALL_STREAM_MAXLEN, ...calls.flatMap((c) => [c.jobId, c.data, c.traceparent])), { maxBatch: 64 });
      this.adds.set(stream, adds);
    }
    return adds;
  }

  private ensureSubscribed(): Promise<unknown> {
    if (this.subscribed) return this.subscribed;
    const sub = this.redis.duplicate('rpc-replies');
    sub.on('pmessage', (_pattern: string, channel: string, raw: string) => {
      const pending = this.pending.get(channel);
      if (!pending) return;
      try {
        pending.onReply(JSON.parse(raw) as RpcReply);
      } catch {
        // A malformed reply is ignored; the caller's timeout still bounds the wait.
      }
    });
    // Replies published while this connection was down are lost (pub/sub keeps nothing). Once
    // it is back, calls whose job has already ended are answered from the job itself, so none
    // waits for its timeout (up to RPC_TIMEOUT_MS) for a reply that will never come.
    let lost = false;
    let giveUp: NodeJS.Timeout | undefined;
    sub.on('close', () => {
      if (lost) return;
      lost = true;
      // A short blip is bridged (the kept replies are read once it is back); an outage is not
      // waited out: the calls in flight get the outage 503 instead of hanging until it ends.
      giveUp = setTimeout(() => {
        for (const pending of this.pending.values()) pending.abandon(outageError('redis'));
      }, REPLY_CONNECTION_GRACE_MS);
      giveUp.unref();
    });
    sub.on('ready', () => {
      if (!lost) return;
      lost = false;
      clearTimeout(giveUp);
      for (const delay of KEPT_REPLY_READS_MS) setTimeout(() => void this.recoverLostReplies(), delay).unref();
    });
    // In a Redis Cluster a failed node moves the subscriber to another at once, without a close:
    // a final reply published meanwhile is read where it is kept, as after a reconnect.
    if (isCluster(sub))
      sub.on('-node', () => {
        for (const delay of KEPT_REPLY_READS_MS) setTimeout(() => void this.recoverLostReplies(), delay).unref();
      });
    this.subscriber = sub;
    this.subscribed = sub.psubscribe(this.redis.names.rpcReply(`${this.instance}-*`)).catch((err: Error) => {
      // The next call tries again rather than failing forever.
      this.subscribed = undefined;
      this.subscriber = undefined;
      void closeRedis(sub);
      throw err;
    });
    return this.subscribed;
  }

  /**
   * Workers keep each final reply for KEPT_REPLY_SECONDS (rpcResult): a call whose reply was published
   * while this connection was down reads it there. A call with neither a kept reply nor its
   * entry still waiting or running in the stream was lost with Redis's state (a restart without
   * persistence): it fails now with a 503.
   */
  private async recoverLostReplies(): Promise<void> {
    for (const pending of this.pending.values()) {
      try {
        const kept = await this.redis.client.get(this.redis.names.rpcResult(pending.contract.name, pending.jobId, pending.shard));
        if (kept) {
          pending.onReply(JSON.parse(kept) as RpcReply);
          continue;
        }
        if (pending.entryId() && (await this.redis.client.xrange(this.redis.names.rpcStream(pending.contract.name, pending.shard), pending.entryId()!, pending.entryId()!)).length > 0) continue;
        pending.onReply({
          kind: 'error',
          error: { type: 'service_unavailable', message: 'The answer was lost while the job queue (Redis) was unavailable; retry the request' },
        });
      } catch {
        // Redis is away again; the next reconnect checks again.
      }
    }
  }

  /**
   * Pending calls fail now rather than when their timers run out (up to RPC_TIMEOUT_MS later,
   * keeping the closed process alive); their jobs may still run to completion on a worker.
   */
  async onApplicationShutdown(): Promise<void> {
    for (const pending of this.pending.values())
      pending.abandon(new ApiError('service_unavailable', 'The service is shutting down; the request was not answered'));
    if (this.subscriber) await closeRedis(this.subscriber);
  }
}
