import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { Logger } from '@nestjs/common';
import type { RedisClient } from './redis-connection';
import type { QueueContract } from '@atelier/contracts';
import { GroupCommit } from './group-commit';
import { InFlightMap } from './in-flight-map';
import { runPeriodically } from './periodic-task';
import { loadLuaScript, luaCommand, RUNTIME_LUA } from './lua-script';
import type { RedisService } from './redis.module';
import { KEPT_REPLY_SECONDS, type RpcReply } from './rpc-messages';

/**
 * Final replies, any number in one script: each is published on its reply channel and kept for
 * KEPT_REPLY_SECONDS (RpcClient reads it there after a reconnect); its call's stream entry is
 * acknowledged and deleted (when given); a failure is appended to the queue's capped failed-calls
 * stream (when given). One reply was a MULTI of up to seven commands, on which ioredis spent
 * 22-35 us of client CPU against 9 us for a script call; replies that finish together share one
 * call (finalRepliesOf), so under load Redis also wakes up once for many of them.
 * Keys and arguments: the script's header.
 */
const FINAL_REPLIES = loadLuaScript(RUNTIME_LUA, 'rpc-final-replies.lua');

export interface FinalReplyOptions {
  /** The stream of the queue's the call came on (RpcCallJob.shard). */
  shard?: number;
  /** The call's stream entry, acknowledged and deleted with the reply. */
  entryId?: string;
  /** Records the error reply in the queue's failed-calls stream, under its originating request. */
  failure?: { requestId: string };
}

/** One reply's keys and arguments, in rpc-final-replies.lua's order. */
interface FinalReplyArgs {
  keys: [string, string, string];
  args: (string | number)[];
}

/**
 * The final replies sent over one Redis connection, group-committed (GroupCommit): alone, a
 * reply goes at once in its own script call; replies that finish while one call is in flight go
 * together in the next. Each resolves once the call holding it has run.
 */
const finalReplies = new WeakMap<RedisClient, GroupCommit<FinalReplyArgs, void>>();

function finalRepliesOf(client: RedisClient): GroupCommit<FinalReplyArgs, void> {
  let batcher = finalReplies.get(client);
  if (!batcher) {
    const script = luaCommand<number>(client, FINAL_REPLIES);
    batcher = new GroupCommit<FinalReplyArgs, void>(async (replies) => {
      await script(replies.length * 3, ...replies.flatMap((r) => r.keys), KEPT_REPLY_SECONDS, RPC_GROUP, ...replies.flatMap((r) => r.args));
      return replies.map(() => undefined);
    }, { maxBatch: 64 });
    finalReplies.set(client, batcher);
  }
  return batcher;
}

/**
 * Sends a call's final reply (see rpc-final-replies.lua). Every final reply goes out through here:
 * the handler's result or error, and the answer for a call lost with its consumer. A handler's
 * failure is also recorded in the queue's failed-calls stream (`failure`; bounded retention,
 * like BullMQ's removeOnFail).
 */
export function sendFinalReply(redis: RedisService, contract: QueueContract, jobId: string, reply: RpcReply, opts: FinalReplyOptions = {}): Promise<void> {
  const text = JSON.stringify(reply);
  const failed = opts.failure && reply.kind === 'error' ? { ...opts.failure, error: JSON.stringify(reply.error) } : undefined;
  return finalRepliesOf(redis.client).submit({
    keys: [redis.names.rpcResult(contract.name, jobId, opts.shard), redis.names.rpcStream(contract.name, opts.shard), redis.names.rpcFailed(contract.name, opts.shard)],
    args: [
      redis.names.rpcReply(jobId),
      text,
      opts.entryId ?? '',
      contract.settings.removeOnFail.count,
      failed ? jobId : '',
      failed?.error ?? '',
      failed?.requestId ?? '',
    ],
  });
}

/** The consumer group every replica of a request/response queue reads through (competing consumers). */
export const RPC_GROUP = 'workers';

/** What a handler sees of a request/response call: the same fields a BullMQ job has for it. */
export interface RpcCallJob {
  id: string;
  data: unknown;
  /** When the caller added it (ms), from the stream entry id. */
  timestamp: number;
  attemptsMade: number;
  opts: { attempts?: number };
  /** The caller's trace (W3C traceparent), when it was traced. */
  traceparent?: string;
  /** Which of the queue's streams it came on (RedisNames.rpcStream): its replies go out beside it. */
  shard: number;
  /**
   * The call's stream entry, for its final reply to acknowledge and delete (sendFinalReply), so
   * replying and acknowledging cost one Redis round trip; once asked for, acknowledging is left
   * to that reply. A call whose reply fails stays pending, and the reclaim tells its caller it
   * was lost.
   */
  acknowledgement(): string;
}

/** Creates the consumer group once (every replica tries; the rest get BUSYGROUP). */
export async function ensureRpcGroup(client: RedisClient, stream: string): Promise<void> {
  try {
    // From the start of the stream: calls added before the first consumer ever started still run.
    await client.xgroup('CREATE', stream, RPC_GROUP, '0', 'MKSTREAM');
  } catch (err) {
    if (!String((err as Error).message).includes('BUSYGROUP')) throw err;
  }
}

/** Calls waiting for a consumer and calls being handled, for the queue-depth metric. */
export async function rpcQueueDepth(client: RedisClient, stream: string): Promise<{ waiting: number; active: number }> {
  const [length, pending] = await Promise.all([client.xlen(stream), client.xpending(stream, RPC_GROUP).catch(() => [0])]);
  const active = Number((pending as unknown[])[0] ?? 0);
  return { waiting: Math.max(0, length - active), active };
}

function fieldsOf(raw: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < raw.length; i += 2) out[raw[i]] = raw[i + 1];
  return out;
}

/**
 * The worker side of a request/response queue on a Redis stream with a consumer group: each
 * call is delivered to exactly one replica (XREADGROUP), at most `concurrency` at a time per
 * process. A call is acknowledged and deleted once its reply went out. While it runs, its entry
 * is re-claimed by this consumer every third of the lock duration, so it never looks idle; an
 * entry idle for longer than the lock duration belongs to a consumer that died, and any replica
 * claims it (XAUTOCLAIM) and tells the caller the request was lost. Request/response calls are
 * never re-run: their caller may already have received part of the answer.
 */
export class RpcStreamConsumer {
  private readonly consumer = `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  private readonly stream: string;
  private blocking?: RedisClient;
  private stopped = false;
  private readonly active = new InFlightMap<string, Promise<void>>();
  private slotFreed?: () => void;
  private loop?: Promise<void>;
  private readonly periodic: { stop(): Promise<void> }[] = [];

  constructor(
    private readonly redis: RedisService,
    private readonly contract: QueueContract,
    private readonly lockDurationMs: number,
    private readonly handle: (job: RpcCallJob) => Promise<unknown>,
    private readonly logger: Logger,
    /** Which of the queue's streams this consumer reads, and how many of its calls it runs at once. */
    private readonly shard = 0,
    private readonly concurrency = contract.settings.concurrency,
  ) {
    this.stream = redis.names.rpcStream(contract.name, shard);
  }

  /** Starts consuming; never waits for Redis (a service boots, and reports 503, while it is away). */
  start(): void {
    this.blocking = this.redis.duplicate(`rpc-consumer:${this.contract.name}:${this.shard}`, true);
    this.loop = this.readLoop();
    // Failures are Redis being away; the next tick tries again.
    const ignore = () => undefined;
    this.periodic.push(
      runPeriodically(Math.max(100, Math.floor(this.lockDurationMs / 3)), () => this.refresh(), ignore),
      runPeriodically(Math.max(200, Math.floor(this.lockDurationMs / 2)), () => this.reclaim(), ignore),
    );
  }

  /** Stops reading; resolves once every call in progress has finished. */
  async close(): Promise<void> {
    this.stopped = true;
    this.slotFreed?.();
    // Ends a blocked XREADGROUP at once (QUIT would wait behind it for the BLOCK timeout).
    this.blocking?.disconnect();
    await Promise.all(this.periodic.map((p) => p.stop()));
    await this.loop;
    await Promise.all(this.active.values());
  }

  private async readLoop(): Promise<void> {
    const blocking = this.blocking!;
    // The group is created over the blocking connection, which waits for Redis however long it is away.
    while (!this.stopped) {
      try {
        await ensureRpcGroup(blocking, this.stream);
        break;
      } catch {
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    while (!this.stopped) {
      const free = this.concurrency - this.active.size;
      if (free <= 0) {
        await new Promise<void>((resolve) => (this.slotFreed = resolve));
        this.slotFreed = undefined;
        continue;
      }
      let read: [string, [string, string[]][]][] | null;
      try {
        read = (await blocking.xreadgroup('GROUP', RPC_GROUP, this.consumer, 'COUNT', Math.min(free, 64), 'BLOCK', 2_000, 'STREAMS', this.stream, '>')) as
          | [string, [string, string[]][]][]
          | null;
      } catch (err) {
        if (this.stopped) break;
        // The stream or group was deleted (FLUSHDB, a Redis restart without persistence): recreate it.
        if (String((err as Error).message).includes('NOGROUP')) await ensureRpcGroup(this.redis.client, this.stream).catch(() => undefined);
        await new Promise((r) => setTimeout(r, 500));
        continue;
      }
      for (const [, entries] of read ?? []) for (const [entryId, fields] of entries) this.dispatch(entryId, fieldsOf(fields));
    }
  }

  private dispatch(entryId: string, fields: Record<string, string>): void {
    let data: unknown;
    try {
      data = JSON.parse(fields.data ?? 'null');
    } catch {
      this.logger.warn(`${this.contract.name}: dropped unreadable call ${entryId}`);
      void this.done(entryId);
      return;
    }
    let acknowledged = false;
    const job: RpcCallJob = {
      id: fields.job ?? entryId,
      data,
      timestamp: Number(entryId.split('-')[0]),
      attemptsMade: 0,
      opts: { attempts: 1 },
      ...(fields.tp && { traceparent: fields.tp }),
      shard: this.shard,
      acknowledgement: () => {
        acknowledged = true;
        return entryId;
      },
    };
    const run = this.handle(job)
      .then(
        () => undefined,
        () => undefined,
      )
      .then(() => (acknowledged ? undefined : this.done(entryId)))
      .finally(() => {
        this.active.delete(entryId);
        this.slotFreed?.();
      });
    this.active.set(entryId, run);
  }

  private async done(entryId: string): Promise<void> {
    await this.redis.client
      .multi()
      .xack(this.stream, RPC_GROUP, entryId)
      .xdel(this.stream, entryId)
      .exec()
      .catch(() => undefined);
  }

  /** Resets the idle time of the calls this process is running, so no replica takes them for lost. */
  private async refresh(): Promise<void> {
    if (this.active.size === 0) return;
    await this.redis.client.xclaim(this.stream, RPC_GROUP, this.consumer, 0, ...this.active.keys(), 'JUSTID');
  }

  /** Calls whose consumer died: their callers are told at once instead of waiting for their timeout. */
  private async reclaim(): Promise<void> {
    if (this.stopped) return;
    const [, claimed, deleted] = (await this.redis.client.xautoclaim(this.stream, RPC_GROUP, this.consumer, this.lockDurationMs, '0-0', 'COUNT', 100)) as [
      string,
      [string, string[] | null][],
      string[] | undefined,
    ];
    for (const [entryId, raw] of claimed) {
      if (this.active.has(entryId)) continue;
      const jobId = raw ? fieldsOf(raw).job : undefined;
      if (jobId) {
        this.logger.warn(`${this.contract.name} call ${jobId} was lost with the process running it; telling its caller`);
        const reply: RpcReply = { kind: 'error', error: { type: 'service_unavailable', message: 'The service handling this request stopped before it answered; retry the request' } };
        await sendFinalReply(this.redis, this.contract, jobId, reply, { entryId, shard: this.shard });
      } else await this.done(entryId);
    }
    for (const entryId of deleted ?? []) await this.done(entryId);
  }
}
