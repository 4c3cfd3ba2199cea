import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  buildAppsForTest,
  canRunThrowawayServers,
  createTestEnvironment,
  internalTextProblem,
  queryOnce,
  startAppProcess,
  startThrowawayPostgres,
  startThrowawayRedis,
  uniqueName,
  waitFor,
  type AppProcess,
  type TestEnvironment,
  type ThrowawayServer,
} from '@atelier/testing';

interface Outcome {
  kind: 'chat' | 'queue' | 'credits' | 'status';
  at: number;
  status: number | 'network-error';
  type?: string;
  /** The error's message, to hold it to plain words. */
  message?: string;
  retryAfter?: string | null;
  generationIds?: string[];
}

const support = canRunThrowawayServers();
const suite = support.ok ? describe : describe.skip;
if (!support.ok) console.warn(`backing-service fault tests skipped: ${support.why}`);

/**
 * The faults every deployment sees (a database restart or failover, a Redis restart) against
 * compiled app processes, on a Postgres and a Redis of this suite's own that it stops and starts.
 * No process may exit, requests that need the missing service get 503 + Retry-After while it is
 * away, and everything serves again on its own once it is back, with the books intact.
 */
suite('backing-service faults (throwaway Postgres and Redis, real processes)', () => {
  let pg: ThrowawayServer;
  let redis: ThrowawayServer;
  let env: TestEnvironment;
  let build: ReturnType<typeof buildAppsForTest>;
  let apiKey: string;
  let base: string;
  const procs: AppProcess[] = [];

  const spawned: ChildProcess[] = [];
  const start = async (name: string, portVar: string, extra: Record<string, string> = {}): Promise<AppProcess> => {
    const proc = await startAppProcess(build, env, name, portVar, { GENERATION_SWEEP_INTERVAL_MS: '500', JOB_LOCK_DURATION_MS: '5000', ...extra }, (c) => spawned.push(c));
    procs.push(proc);
    return proc;
  };
  const running = () => procs.filter((p) => p.child.exitCode === null && p.child.signalCode === null);
  const expectAllAlive = () => {
    for (const p of procs.filter((q) => !running().includes(q)))
      throw new Error(`${p.name} exited (${p.child.exitCode ?? p.child.signalCode}):\n${p.output().slice(-3000)}`);
  };
  const healthy = async () => (await Promise.all(running().map((p) => fetch(`http://127.0.0.1:${p.port}/health`).then((r) => r.status, () => 0)))).every((s) => s === 200);
  const sql = <T extends Record<string, unknown>>(text: string, params: unknown[] = []) => queryOnce<T>(env.databaseUrl, text, params);

  /**
   * One request of a kind of traffic. The balance is read on the credit ledger's own pg pool, and
   * a generation's status (the last one enqueued) on the queue's, not through Prisma: those pools
   * must live through every fault too.
   */
  const send = (kind: Outcome['kind'], generationId?: string) =>
    kind === 'credits' || kind === 'status'
      ? fetch(`${base}/api/${kind === 'credits' ? 'credits' : `ai/queue/${generationId}`}`, { headers: { authorization: `Bearer ${apiKey}` }, signal: AbortSignal.timeout(20_000) })
      : fetch(`${base}/api/ai/${kind === 'chat' ? 'chat/completions' : 'queue'}`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${apiKey}`,
            'content-type': 'application/json',
            // Enqueues claim a fresh Idempotency-Key, so its pg pool lives through every fault too.
            ...(kind === 'queue' && { 'idempotency-key': `fault-${randomUUID()}` }),
          },
          body: JSON.stringify(
            kind === 'chat' ? { model: 'local-chat', messages: [{ role: 'user', content: 'say something' }], max_tokens: 8 } : { model: 'local-image', prompt: 'fault' },
          ),
          signal: AbortSignal.timeout(20_000),
        });

  /** Chat, enqueue, balance and status requests back to back until stopped, every outcome recorded. */
  const traffic = () => {
    const outcomes: Outcome[] = [];
    let stopped = false;
    let enqueued: string | undefined;
    const loop = async (kind: Outcome['kind'], pauseMs: number) => {
      while (!stopped) {
        if (kind === 'status' && !enqueued) {
          await new Promise((r) => setTimeout(r, pauseMs));
          continue;
        }
        const at = Date.now();
        const res = await send(kind, enqueued).catch(() => undefined);
        if (!res) outcomes.push({ kind, at, status: 'network-error' });
        else {
          const body = (await res.json().catch(() => ({}))) as { error?: { type?: string; message?: string }; generations?: { generation_id: string }[] };
          outcomes.push({
            kind,
            at,
            status: res.status,
            type: body.error?.type,
            message: body.error?.message,
            retryAfter: res.headers.get('retry-after'),
            generationIds: body.generations?.map((g) => g.generation_id),
          });
          enqueued = body.generations?.[0]?.generation_id ?? enqueued;
        }
        await new Promise((r) => setTimeout(r, pauseMs));
      }
    };
    const done = Promise.all([loop('chat', 20), loop('queue', 100), loop('credits', 100), loop('status', 100)]);
    return {
      outcomes,
      ok: (kind: Outcome['kind'], after = 0) => outcomes.filter((o) => o.kind === kind && o.status === 200 && o.at >= after).length,
      unavailable: (after = 0) => outcomes.filter((o) => o.status === 503 && o.at >= after).length,
      stop: async () => {
        stopped = true;
        await done;
      },
    };
  };

  /** What the contract promises after any fault: every generation ends once, one event each, each charged at most once, no credits held. */
  const expectBooksBalanced = async () => {
    await waitFor(async () => (await sql(`SELECT 1 FROM generations WHERE status IN ('queued', 'processing')`)).length === 0, {
      timeoutMs: 60_000,
      description: 'every generation to finish',
    });
    await waitFor(async () => (await sql(`SELECT 1 FROM credit_reservations WHERE status = 'open'`)).length === 0, {
      timeoutMs: 30_000,
      description: 'no credit reservation left open',
    });
    const [gen] = await sql<{ finished: string; events: string; published: string; double_events: string }>(`
      SELECT (SELECT count(*) FROM generations WHERE status IN ('succeeded', 'failed')) AS finished,
             (SELECT count(*) FROM generation_events) AS events,
             (SELECT count(*) FROM generation_events WHERE published_at IS NOT NULL) AS published,
             (SELECT count(*) FROM (SELECT generation_id FROM generation_events GROUP BY 1 HAVING count(*) > 1) d) AS double_events`);
    expect(Number(gen.events)).toBe(Number(gen.finished));
    expect(gen.double_events).toBe('0');
    await waitFor(async () => (await sql<{ n: string }>(`SELECT count(*) AS n FROM generation_events WHERE published_at IS NULL`))[0].n === '0', {
      description: 'every event to be published',
    });
    const [charges] = await sql<{ twice: string; charged: string; recorded: string }>(`
      SELECT (SELECT count(*) FROM (SELECT reservation_id FROM credit_ledger WHERE kind = 'charge' GROUP BY 1 HAVING count(*) > 1) d) AS twice,
             (SELECT coalesce(sum(-amount), 0) FROM credit_ledger WHERE kind = 'charge')::text AS charged,
             ((SELECT coalesce(sum(cost), 0) FROM chat_usage) + (SELECT coalesce(sum(cost), 0) FROM generations))::text AS recorded`);
    expect(charges.twice).toBe('0');
    expect(Number(charges.charged)).toBeGreaterThan(0);
    expect(charges.charged).toBe(charges.recorded);
  };

  /** Every answer during a fault is a success or the outage 503 with Retry-After, never a 500 or a hang. */
  const expectOnlySuccessOrOutage = (outcomes: Outcome[]) => {
    const bad = outcomes.filter((o) => o.status !== 200 && !(o.status === 503 && o.type === 'service_unavailable' && o.retryAfter));
    expect(bad).toEqual([]);
    // In plain words: no client library's text (a Redis restart once answered ioredis's "Reached the max retries per request limit").
    const leaks = [...new Set(outcomes.filter((o) => o.message !== undefined && internalTextProblem(o.message)).map((o) => o.message))];
    expect(leaks).toEqual([]);
  };

  beforeAll(async () => {
    [pg, redis] = await Promise.all([startThrowawayPostgres(), startThrowawayRedis()]);
    env = await createTestEnvironment({ STORAGE_DIR: mkdtempSync(path.join(tmpdir(), 'atelier-faults-')) }, { postgres: pg.url, redis: redis.url });
    build = buildAppsForTest(['gateway', 'chat', 'media', 'queue-worker', 'events', 'fine-tune']);
    const gateway = await start('gateway', 'PORT');
    // All six, as `npm start` runs them: every one must live through the faults.
    await Promise.all([
      start('chat', 'CHAT_PORT'),
      start('media', 'MEDIA_PORT'),
      start('queue-worker', 'QUEUE_WORKER_PORT'),
      start('events', 'EVENTS_PORT'),
      start('fine-tune', 'FINE_TUNE_PORT'),
    ]);
    base = `http://127.0.0.1:${gateway.port}`;
    const res = await fetch(`${base}/api/admin/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${env.config.ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ username: uniqueName(), credits: '1000' }),
    });
    expect(res.status).toBe(201);
    apiKey = ((await res.json()) as { api_key: string }).api_key;
  }, 120_000);

  afterAll(async () => {
    for (const c of spawned) if (c.exitCode === null) c.kill('SIGKILL');
    build?.cleanup();
    await Promise.all([pg?.destroy(), redis?.destroy()]);
  });

  /**
   * Stops `server` under chat and enqueue traffic, requires 503s (and a 503 readiness) while it is
   * down and no process to exit, starts it again and requires service and every health check
   * back within 30 s. Returns every answer the traffic got.
   */
  const restartUnderTraffic = async (server: ThrowawayServer, name: string): Promise<Outcome[]> => {
    const load = traffic();
    try {
      await waitFor(() => load.ok('chat') >= 20 && load.ok('queue') >= 5 && load.ok('credits') >= 5 && load.ok('status') >= 5, { timeoutMs: 20_000, description: 'traffic to flow' });
      await server.stop();
      const downAt = Date.now();
      await waitFor(() => load.unavailable(downAt) >= 10, { timeoutMs: 15_000, description: `503s while ${name} is down` });
      // Readiness says so too, so Kubernetes takes the pods out of rotation instead of restarting them.
      expect((await fetch(`${base}/health`)).status).toBe(503);
      expectAllAlive();
      await server.start();
      const upAt = Date.now();
      await waitFor(() => load.ok('chat', upAt) >= 5 && load.ok('queue', upAt) >= 2 && load.ok('credits', upAt) >= 2 && load.ok('status', upAt) >= 2, { timeoutMs: 30_000, description: `service after ${name} is back` });
      await waitFor(healthy, { timeoutMs: 30_000 - (Date.now() - upAt), description: 'every service healthy' });
    } finally {
      await load.stop();
    }
    expectAllAlive();
    expectOnlySuccessOrOutage(load.outcomes);
    return load.outcomes;
  };

  it('a Postgres restart under chat and enqueue traffic: no process exits, 503 while it is down, serving again within 30 s', async () => {
    await restartUnderTraffic(pg, 'Postgres');
    await expectBooksBalanced();
  }, 120_000);

  it('a Redis restart under traffic: no process exits, chat gets 503 while it is down, enqueues are kept and run after', async () => {
    const outcomes = await restartUnderTraffic(redis, 'Redis');
    // Generations are durable in Postgres: those accepted while Redis was away were not refused, and they finish.
    expect(outcomes.filter((o) => o.kind === 'queue' && o.status !== 200)).toEqual([]);
    await expectBooksBalanced();
  }, 120_000);

  it('Postgres stopped for 20 s while generations render: each still ends once, succeeded, with one event and one charge', async () => {
    // A worker whose renders take long enough for the outage to land in the middle of them.
    const first = procs.find((p) => p.name === 'queue-worker')!;
    first.child.kill('SIGTERM');
    await new Promise((resolve) => first.child.once('exit', resolve));
    procs.splice(procs.indexOf(first), 1);
    const worker = await start('queue-worker', 'QUEUE_WORKER_PORT', { LOCAL_ENGINE_LATENCY_MS: '4000' });
    const res = await fetch(`${base}/api/ai/queue`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'local-image', prompt: 'through the outage', num_generations: 4 }),
    });
    expect(res.status).toBe(200);
    const ids = ((await res.json()) as { generations: { generation_id: string }[] }).generations.map((g) => g.generation_id);
    await waitFor(async () => (await sql(`SELECT 1 FROM generations WHERE id = ANY($1::uuid[]) AND status = 'processing'`, [ids])).length === 4, {
      timeoutMs: 20_000,
      description: 'all four to be rendering',
    });
    await pg.stop();
    // The outage itself lasts a fixed time; the renders (4 s) finish while Postgres is away.
    await new Promise((r) => setTimeout(r, 20_000));
    expectAllAlive();
    await pg.start();
    const rows = await waitFor(
      async () => {
        const r = await sql<{ id: string; status: string; cost: string | null; events: string; charges: string }>(
          `SELECT g.id::text, g.status::text, g.cost::text,
                  (SELECT count(*) FROM generation_events e WHERE e.generation_id = g.id) AS events,
                  (SELECT count(*) FROM credit_ledger l WHERE l.reservation_id = g.reservation_id AND l.kind = 'charge') AS charges
           FROM generations g WHERE g.id = ANY($1::uuid[])`,
          [ids],
        );
        return r.every((g) => !['queued', 'processing'].includes(g.status)) ? r : undefined;
      },
      { timeoutMs: 60_000, description: 'the four generations to finish' },
    );
    expect(rows.map((g) => [g.status, g.events, g.charges])).toEqual(ids.map(() => ['succeeded', '1', '1']));
    expect(rows.every((g) => Number(g.cost) > 0)).toBe(true);
    expect(worker.child.exitCode).toBeNull();
    expectAllAlive();
    await expectBooksBalanced();
  }, 150_000);

  it("a webhook attempt whose record meets a Postgres outage is still retried: the message is delivered and both attempts recorded", async () => {
    // The receiver fails the first attempt and, before answering it, takes Postgres down for 3 s,
    // so the attempt's record meets the outage.
    const received: number[] = [];
    const receiver = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        void (async () => {
          received.push(received.length + 1);
          if (received.length === 1) {
            await pg.stop();
            setTimeout(() => void pg.start(), 3000);
            res.writeHead(500).end('not now');
          } else res.writeHead(200).end('ok');
        })();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const port = (receiver.address() as AddressInfo).port;
    try {
      const old = procs.find((p) => p.name === 'queue-worker')!;
      old.child.kill('SIGTERM');
      await new Promise((resolve) => old.child.once('exit', resolve));
      procs.splice(procs.indexOf(old), 1);
      await start('queue-worker', 'QUEUE_WORKER_PORT', { MEDIA_FETCH_ALLOWED_HOSTS: `127.0.0.1:${port}`, WEBHOOK_RETRY_DELAYS_MS: '300,300' });
      const res = await fetch(`${base}/api/ai/queue`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'local-image', prompt: 'hooked through an outage', webhook: `http://127.0.0.1:${port}/hook`, webhook_events_filter: ['completed'] }),
      });
      expect(res.status).toBe(200);
      const id = ((await res.json()) as { generations: { generation_id: string }[] }).generations[0].generation_id;
      await waitFor(() => received.length >= 2, { timeoutMs: 60_000, description: 'the second attempt, after the outage' });
      const attempts = await waitFor(
        async () => ((r) => (r.length === 2 ? r : undefined))(await sql<{ attempt: number; status_code: number | null }>(`SELECT attempt, status_code FROM webhook_deliveries WHERE generation_id = $1::uuid ORDER BY attempt`, [id])),
        { timeoutMs: 30_000, description: 'both attempts recorded' },
      );
      expect(attempts.map((a) => [a.attempt, a.status_code])).toEqual([
        [1, 500],
        [2, 200],
      ]);
      expect(received).toHaveLength(2);
      await waitFor(healthy, { timeoutMs: 30_000, description: 'every service healthy again' });
      expectAllAlive();
    } finally {
      await new Promise<void>((r) => receiver.close(() => r()));
    }
  }, 150_000);
});
