import { Module, type DynamicModule, type Type } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { AppConfig } from '@atelier/config';
import { ApiError, defineQueue, type QueueContract, type QueueSettings } from '@atelier/contracts';
import { PrismaService } from '@atelier/db';
import { createTestEnvironment, freePort, internalTextProblem, waitFor, type TestEnvironment } from '@atelier/testing';
import { createService } from './bootstrap-service';
import { HandlesQueue, type JobContext, type JobHandler } from './job-handler';
import { RedisService } from './redis.module';
import { RpcClient } from './rpc-client.service';
import { KEPT_REPLY_SECONDS, OLDEST_KEPT_REPLY_READ_MS } from './rpc-messages';
import { ensureRpcGroup, RPC_GROUP, rpcQueueDepth } from './rpc-stream-consumer';
import { ServiceRuntimeModule } from './service-runtime.module';

type TestJob =
  | { op: 'echo'; id: string }
  | { op: 'api-error'; id: string }
  | { op: 'crash'; id: string }
  | { op: 'chunks'; id: string }
  | { op: 'hang'; id: string }
  | { op: 'drop-reply-connection'; id: string };

interface TestResult {
  id: string;
  replica: string;
}

const RPC_SETTINGS: QueueSettings = {
  kind: 'rpc',
  attempts: 1,
  backoff: { type: 'fixed', delay: 0 },
  concurrency: 8,
  removeOnComplete: { count: 100, age: 60 },
  removeOnFail: { count: 100, age: 60 },
  lockDurationMs: 10_000,
};

// The Redis prefix is unique per suite, so fixed queue names cannot collide with other runs.
const TEST_QUEUE = defineQueue<TestJob, TestResult>()('rpc-test', RPC_SETTINGS);
const DRAIN_QUEUE = defineQueue<{ id: string }, { id: string; db: 'ok' }>()('rpc-test-drain', RPC_SETTINGS);
const STUCK_QUEUE = defineQueue<{ id: string }, void>()('rpc-test-stuck', RPC_SETTINGS);
/** Served only by a replica started after its consumer died. */
const ORPHAN_QUEUE = defineQueue<{ id: string }, void>()('rpc-test-orphan', RPC_SETTINGS);
/** Nobody consumes this one: calls on it stay pending. */
const UNSERVED_QUEUE = defineQueue<{ id: string }, void>()('rpc-test-unserved', RPC_SETTINGS);
/** Nobody consumes this one either; for calls made all at once. */
const BURST_QUEUE = defineQueue<{ id: string }, void>()('rpc-test-burst', RPC_SETTINGS);

/** One instance per worker replica; records what that replica saw. */
@HandlesQueue(TEST_QUEUE)
class TestHandler implements JobHandler<typeof TEST_QUEUE> {
  static nextReplica = 1;
  readonly replica = `replica-${TestHandler.nextReplica++}`;
  readonly handled: string[] = [];
  readonly started = new Set<string>();
  readonly aborted = new Set<string>();
  /** Per 'drop-reply-connection' job: how many reply connections it closed. */
  readonly droppedReplyConnections: number[] = [];

  constructor(private readonly redis: RedisService) {}

  async handle(job: TestJob, ctx: JobContext): Promise<TestResult> {
    this.started.add(job.id);
    this.handled.push(job.id);
    switch (job.op) {
      case 'echo':
        // A little work, so concurrent calls overlap and both replicas get some.
        await new Promise((r) => setTimeout(r, 20));
        return { id: job.id, replica: this.replica };
      case 'api-error':
        throw new ApiError('insufficient_credits', `Not enough credits for ${job.id}`, { needed: '5' });
      case 'crash':
        throw new Error(`connect ECONNREFUSED 10.0.0.7:5432 password=hunter2 (${job.id})`);
      case 'chunks':
        for (const n of [1, 2, 3]) await ctx.sendChunk({ n, id: job.id });
        return { id: job.id, replica: this.replica };
      case 'hang':
        // Never finishes on its own; only a cancellation ends it.
        await new Promise<void>((resolve) => {
          if (ctx.signal.aborted) return resolve();
          ctx.signal.addEventListener('abort', () => resolve(), { once: true });
        });
        this.aborted.add(job.id);
        throw new ApiError('timeout', 'cancelled');
      case 'drop-reply-connection': {
        // Closes the reply connections of this suite's callers (named after its Redis prefix) and
        // answers at once: the reply is published before the caller has reconnected (ioredis
        // waits at least 50 ms before it tries), so nobody is subscribed to receive it.
        const name = `${this.redis.config.REDIS_PREFIX}:rpc-replies`;
        const clients = String(await this.redis.client.call('CLIENT', 'LIST', 'TYPE', 'pubsub')).split('\n');
        const ids = clients.filter((line) => line.includes(` name=${name} `)).map((line) => /\bid=(\d+)/.exec(line)![1]);
        for (const id of ids) await this.redis.client.call('CLIENT', 'KILL', 'ID', id);
        this.droppedReplyConnections.push(ids.length);
        return { id: job.id, replica: this.replica };
      }
    }
  }
}

/** Takes a moment and needs Postgres, like real work; used to watch a replica drain on shutdown. */
@HandlesQueue(DRAIN_QUEUE)
class DrainHandler implements JobHandler<typeof DRAIN_QUEUE> {
  readonly started = new Set<string>();
  constructor(private readonly prisma: PrismaService) {}

  async handle(job: { id: string }): Promise<{ id: string; db: 'ok' }> {
    this.started.add(job.id);
    await new Promise((r) => setTimeout(r, 300));
    await this.prisma.ping();
    return { id: job.id, db: 'ok' };
  }
}

/** Ignores cancellation entirely until the test lets it go. */
@HandlesQueue(STUCK_QUEUE)
class StuckHandler implements JobHandler<typeof STUCK_QUEUE> {
  readonly started = new Set<string>();
  readonly aborted = new Set<string>();
  release!: () => void;
  private readonly released = new Promise<void>((resolve) => (this.release = resolve));

  async handle(job: { id: string }, ctx: JobContext): Promise<void> {
    this.started.add(job.id);
    ctx.signal.addEventListener('abort', () => this.aborted.add(job.id), { once: true });
    await this.released;
  }
}

@HandlesQueue(ORPHAN_QUEUE)
class OrphanHandler implements JobHandler<typeof ORPHAN_QUEUE> {
  readonly started = new Set<string>();
  async handle(job: { id: string }): Promise<void> {
    this.started.add(job.id);
  }
}

describe('RpcClient over Redis streams', () => {
  let env: TestEnvironment;
  let caller: NestFastifyApplication;
  let rpc: RpcClient;
  let replicas: NestFastifyApplication[];
  const apps: NestFastifyApplication[] = [];
  let seq = 0;
  const nextId = (label: string) => `${label}-${++seq}`;

  function serviceModule(name: string, consumes: QueueContract[], providers: Type<unknown>[], config: AppConfig): DynamicModule {
    @Module({})
    class RpcTestModule {}
    return {
      module: RpcTestModule,
      imports: [ServiceRuntimeModule.forRoot({ service: name, config, consumes })],
      providers,
    };
  }

  async function start(name: string, consumes: QueueContract[] = [], providers: Type<unknown>[] = [], config = env.config) {
    const app = await createService(serviceModule(name, consumes, providers, config), config, { service: name });
    apps.push(app);
    return app;
  }

  const handlers = () => replicas.map((app) => app.get(TestHandler));
  const handlerThatStarted = (id: string) => handlers().find((h) => h.started.has(id));

  async function rejection(promise: Promise<unknown>): Promise<ApiError> {
    const err = await promise.then(
      () => {
        throw new Error('expected the call to fail');
      },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApiError);
    return err as ApiError;
  }

  beforeAll(async () => {
    env = await createTestEnvironment({ LOG_LEVEL: 'silent' });
    replicas = [await start('worker', [TEST_QUEUE], [TestHandler]), await start('worker', [TEST_QUEUE], [TestHandler])];
    caller = await start('caller');
    rpc = caller.get(RpcClient);
  });

  afterAll(async () => {
    for (const app of apps.reverse()) await app.close();
    await env?.cleanup();
  });

  it("returns the handler's result", async () => {
    const id = nextId('echo');
    const result = await rpc.call(TEST_QUEUE, { op: 'echo', id });
    expect(result).toEqual({ id, replica: expect.stringMatching(/^replica-/) });
  });

  it("passes a handler's ApiError to the caller unchanged", async () => {
    const id = nextId('api-error');
    const err = await rejection(rpc.call(TEST_QUEUE, { op: 'api-error', id }));
    expect(err.type).toBe('insufficient_credits');
    expect(err.status).toBe(402);
    expect(err.message).toBe(`Not enough credits for ${id}`);
    expect(err.detail).toEqual({ needed: '5' });
  });

  it("says in plain words that the job queue is away when Redis cannot be reached, never the client library's text", async () => {
    // A caller that never reached its Redis: calls wait for the first connect, then fail with ioredis's own error.
    const away = await start('caller-without-redis', [], [], { ...env.config, REDIS_URL: `redis://127.0.0.1:${await freePort()}` });
    const err = await rejection(away.get(RpcClient).call(UNSERVED_QUEUE, { id: nextId('away') }, { timeoutMs: 30_000 }));
    expect(err.type).toBe('service_unavailable');
    expect(err.message).toBe('The job queue (Redis) is temporarily unavailable; retry in a few seconds');
    expect(internalTextProblem(err.message)).toBeUndefined();
  });

  it('reports any other failure as a generic 500 without leaking internals', async () => {
    const err = await rejection(rpc.call(TEST_QUEUE, { op: 'crash', id: nextId('crash') }));
    expect(err.type).toBe('internal_error');
    expect(err.status).toBe(500);
    expect(err.message).not.toMatch(/ECONNREFUSED|10\.0\.0\.7|hunter2|password/);
    expect(err.detail).toBeUndefined();
  });

  it("keeps each final reply for a caller whose reply channel dropped, and records failures in the queue's capped failed-calls stream", async () => {
    const redis = caller.get(RedisService);
    const echoId = nextId('echo');
    const failId = nextId('api-error');
    await rpc.call(TEST_QUEUE, { op: 'echo', id: echoId });
    await rejection(rpc.call(TEST_QUEUE, { op: 'api-error', id: failId }));

    // The failure is recorded once, under its job id, with the error the caller got.
    const failed = (await redis.client.xrange(redis.names.rpcFailed(TEST_QUEUE.name), '-', '+')).map(([, fields]) => {
      const f: Record<string, string> = {};
      for (let i = 0; i < fields.length; i += 2) f[fields[i]] = fields[i + 1];
      return f;
    });
    const records = failed.filter((f) => f.error.includes(failId));
    expect(records).toHaveLength(1);
    expect(JSON.parse(records[0].error)).toEqual({ type: 'insufficient_credits', message: `Not enough credits for ${failId}`, detail: { needed: '5' } });
    expect(failed.some((f) => f.error.includes(echoId))).toBe(false);

    // Both final replies are kept, as sent, under their job ids: long enough for the last read
    // after a reconnect, and no longer, since every reply of every call is kept.
    const kept = async (jobId: string) => ({ reply: JSON.parse((await redis.client.get(redis.names.rpcResult(TEST_QUEUE.name, jobId)))!), ttl: await redis.client.ttl(redis.names.rpcResult(TEST_QUEUE.name, jobId)) });
    const failure = await kept(records[0].job);
    expect(failure.reply).toEqual({ kind: 'error', error: { type: 'insufficient_credits', message: `Not enough credits for ${failId}`, detail: { needed: '5' } } });
    expect(failure.ttl * 1000).toBeGreaterThan(OLDEST_KEPT_REPLY_READ_MS);
    expect(failure.ttl).toBeLessThanOrEqual(KEPT_REPLY_SECONDS);
    expect(KEPT_REPLY_SECONDS).toBeLessThanOrEqual(30);
    const keys = await redis.client.keys(redis.names.rpcResult(TEST_QUEUE.name, '*'));
    const replies = await Promise.all(keys.map(async (k) => JSON.parse((await redis.client.get(k))!) as { kind: string; data?: { id?: string } }));
    expect(replies.filter((r) => r.kind === 'result' && r.data?.id === echoId)).toHaveLength(1);
    // And neither call is left pending or queued in the stream.
    expect(await rpcQueueDepth(redis.client, redis.names.rpcStream(TEST_QUEUE.name))).toEqual({ waiting: 0, active: 0 });
  });

  it('answers a call whose reply was published while its reply connection was down, from the kept reply', async () => {
    const id = nextId('dropped');
    const started = performance.now();
    expect(await rpc.call(TEST_QUEUE, { op: 'drop-reply-connection', id })).toMatchObject({ id });
    expect(handlerThatStarted(id)!.droppedReplyConnections).toEqual([1]);
    // Read once the connection was back, not waited out until the call's timeout.
    expect(performance.now() - started).toBeLessThan(OLDEST_KEPT_REPLY_READ_MS);
    // And the caller's reply connection works again for the next call.
    const next = nextId('echo');
    expect(await rpc.call(TEST_QUEUE, { op: 'echo', id: next })).toMatchObject({ id: next });
  });

  it('hands each of 40 concurrent calls to exactly one of two worker replicas', async () => {
    for (const h of handlers()) h.handled.length = 0;
    const ids = Array.from({ length: 40 }, () => nextId('fanout'));
    const results = await Promise.all(ids.map((id) => rpc.call(TEST_QUEUE, { op: 'echo', id })));

    expect(results.map((r) => r.id)).toEqual(ids);
    const [a, b] = handlers();
    const all = [...a.handled, ...b.handled];
    expect(all).toHaveLength(40); // no call ran twice (a broadcast transport would give 80)
    expect(new Set(all)).toEqual(new Set(ids)); // and none was lost
    // Both replicas took part: the work is shared, not pinned to one consumer.
    expect(a.handled.length).toBeGreaterThan(0);
    expect(b.handled.length).toBeGreaterThan(0);
    // Each caller got the answer of the replica that actually ran its job.
    for (const r of results) expect(handlers().find((h) => h.replica === r.replica)!.handled).toContain(r.id);
    // Each call was acknowledged and deleted together with its reply: none is left pending or queued.
    const redis = caller.get(RedisService);
    expect(await rpcQueueDepth(redis.client, redis.names.rpcStream(TEST_QUEUE.name))).toEqual({ waiting: 0, active: 0 });
  });

  it('adds calls made at the same moment each under its own entry, so cancelling some removes exactly those', async () => {
    const redis = caller.get(RedisService);
    const stream = redis.names.rpcStream(BURST_QUEUE.name);
    const ids = Array.from({ length: 12 }, () => nextId('burst'));
    const aborts = ids.map(() => new AbortController());
    // All twelve start in one tick: the first is added alone, the rest together while it is in flight.
    const outcomes = ids.map((id, i) =>
      rpc.call(BURST_QUEUE, { id }, { timeoutMs: 60_000, signal: aborts[i].signal }).then(
        () => 'resolved',
        (e: unknown) => e,
      ),
    );
    const queuedIds = async () => (await redis.client.xrange(stream, '-', '+')).map(([, f]) => (JSON.parse(f[f.indexOf('data') + 1]) as { id: string }).id);
    await waitFor(async () => (await queuedIds()).length === ids.length, { description: 'all twelve calls to be queued' });
    expect((await queuedIds()).sort()).toEqual([...ids].sort());
    const cancelled = new Set([ids[0], ids[2], ids[5], ids[11]]);
    ids.forEach((id, i) => cancelled.has(id) && aborts[i].abort());
    for (const [i, id] of ids.entries()) if (cancelled.has(id)) expect(((await outcomes[i]) as ApiError).message).toBe('The request was cancelled');
    await waitFor(async () => (await queuedIds()).length === ids.length - cancelled.size, { description: 'the cancelled entries to be removed' });
    expect((await queuedIds()).sort()).toEqual(ids.filter((id) => !cancelled.has(id)).sort());
    // The rest are still waiting for a consumer.
    ids.forEach((id, i) => cancelled.has(id) || aborts[i].abort());
    await Promise.all(outcomes);
  });

  it('delivers streamed chunks in order, before the result', async () => {
    const id = nextId('chunks');
    const events: unknown[] = [];
    const result = await rpc.call(TEST_QUEUE, { op: 'chunks', id }, { onChunk: (chunk) => events.push(chunk) });
    events.push({ result });
    expect(events).toEqual([{ n: 1, id }, { n: 2, id }, { n: 3, id }, { result: { id, replica: expect.any(String) } }]);
  });

  it('answers 504 after timeoutMs and cancels the job on the worker', async () => {
    const id = nextId('hang');
    const started = Date.now();
    const err = await rejection(rpc.call(TEST_QUEUE, { op: 'hang', id }, { timeoutMs: 300 }));
    expect(err.type).toBe('timeout');
    expect(err.status).toBe(504);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(Date.now() - started).toBeLessThan(5000);
    // The cancel broadcast reaches whichever replica runs the job and aborts its signal.
    const handler = await waitFor(() => handlerThatStarted(id), { description: `job ${id} to start` });
    await waitFor(() => handler.aborted.has(id), { description: `job ${id} to be aborted` });
  });

  it("aborts the worker's job when the caller's signal is aborted", async () => {
    const id = nextId('hang');
    const controller = new AbortController();
    const call = rpc.call(TEST_QUEUE, { op: 'hang', id }, { signal: controller.signal, timeoutMs: 20_000 });
    const handler = await waitFor(() => handlerThatStarted(id), { description: `job ${id} to start` });
    expect(handler.aborted.has(id)).toBe(false);
    controller.abort();
    const err = await rejection(call);
    expect(err.status).toBe(504);
    await waitFor(() => handler.aborted.has(id), { description: `job ${id} to be aborted` });
  });

  it('lets a replica that is shutting down finish its in-flight job and deliver the result', async () => {
    const drainer = await start('drain-worker', [DRAIN_QUEUE], [DrainHandler]);
    const id = nextId('drain');
    const call = rpc.call(DRAIN_QUEUE, { id }, { timeoutMs: 10_000 });
    await waitFor(() => drainer.get(DrainHandler).started.has(id), { description: `job ${id} to start` });
    // Shut down mid-job: the job still needs Postgres and Redis to finish and reply.
    const closing = drainer.close();
    await expect(call).resolves.toEqual({ id, db: 'ok' });
    await closing;
    apps.splice(apps.indexOf(drainer), 1);
  });

  it('does not hang shutdown on a job that ignores cancellation: aborts it after SHUTDOWN_TIMEOUT_MS', async () => {
    const config: AppConfig = { ...env.config, SHUTDOWN_TIMEOUT_MS: 300 };
    const stuck = await start('stuck-worker', [STUCK_QUEUE], [StuckHandler], config);
    const handler = stuck.get(StuckHandler);
    const id = nextId('stuck');
    const call = rpc.call(STUCK_QUEUE, { id }, { timeoutMs: 20_000 });
    call.catch(() => undefined);
    await waitFor(() => handler.started.has(id), { description: `job ${id} to start` });
    const started = Date.now();
    try {
      await stuck.close();
      expect(Date.now() - started).toBeLessThan(5000);
      expect(handler.aborted.has(id)).toBe(true);
    } finally {
      handler.release();
      apps.splice(apps.indexOf(stuck), 1);
    }
  });

  it('fails pending calls at once when the calling service shuts down', async () => {
    const leaving = await start('leaving-caller');
    const call = leaving.get(RpcClient).call(UNSERVED_QUEUE, { id: nextId('unserved') }, { timeoutMs: 60_000 });
    const outcome = call.then(
      () => 'resolved',
      (e: unknown) => e,
    );
    // The job is queued once the call is under way; only then is shutdown meaningful.
    const redis = leaving.get(RedisService);
    await waitFor(async () => (await rpcQueueDepth(redis.client, redis.names.rpcStream(UNSERVED_QUEUE.name))).waiting === 1, {
      description: 'the call to be queued',
    });
    const started = Date.now();
    await leaving.close();
    apps.splice(apps.indexOf(leaving), 1);
    const err = await outcome;
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(503);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('tells the caller at once when the process handling its call died, instead of after the call timeout, and never runs it twice', async () => {
    const redis = caller.get(RedisService);
    const stream = redis.names.rpcStream(ORPHAN_QUEUE.name);
    await ensureRpcGroup(redis.client, stream);
    const id = nextId('orphan');
    const started = Date.now();
    const call = rpc.call(ORPHAN_QUEUE, { id }, { timeoutMs: 60_000 });
    // A consumer takes the call and dies without a word: read it under a name that never acknowledges or refreshes it.
    await waitFor(async () => (await redis.client.xreadgroup('GROUP', RPC_GROUP, 'crashed-consumer', 'COUNT', 1, 'STREAMS', stream, '>')) ?? undefined, {
      description: 'the call to reach the doomed consumer',
    });
    // A live replica (lock duration 300 ms) finds the entry idle and answers for it.
    const rescuer = await start('rescuer', [ORPHAN_QUEUE], [OrphanHandler], { ...env.config, JOB_LOCK_DURATION_MS: 300 });
    const err = await rejection(call);
    expect(err.status).toBe(503);
    expect(err.message).toMatch(/stopped before it answered/);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(rescuer.get(OrphanHandler).started.has(id)).toBe(false);
    await waitFor(async () => {
      const depth = await rpcQueueDepth(redis.client, stream);
      return depth.waiting === 0 && depth.active === 0;
    }, { description: 'the lost call to be acknowledged and removed' });
    // The failed-calls stream records handlers' failures; a call lost with its consumer never ran one.
    expect(await redis.client.xlen(redis.names.rpcFailed(ORPHAN_QUEUE.name))).toBe(0);
  });
});
