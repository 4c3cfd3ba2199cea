import type { ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import {
  buildAppsForTest,
  createTestEnvironment,
  queryOnce,
  startAppProcess,
  uniqueName,
  waitFor,
  type AppProcess,
  type TestEnvironment,
} from '@atelier/testing';

/**
 * Crashes around a paid synchronous request. A gateway process killed while a synchronous render is under way: nobody is left to settle the
 * request's reservation. The media service's stale-reservation sweep must give the credits back
 * once the request can no longer be running (RPC_TIMEOUT_MS + RESERVATION_GRACE_MS), and never
 * charge them.
 */
describe('crashes during a paid synchronous request (real processes)', () => {
  let env: TestEnvironment;
  let build: ReturnType<typeof buildAppsForTest>;
  const spawned: ChildProcess[] = [];
  // Short windows so the test can see the whole lifecycle; the defaults are 15 min and 5 min.
  const timing = { RPC_TIMEOUT_MS: '3000', RESERVATION_GRACE_MS: '1500', RESERVATION_SWEEP_INTERVAL_MS: '250' };
  const start = (name: string, portVar: string, extra: Record<string, string> = {}): Promise<AppProcess> =>
    startAppProcess(build, env, name, portVar, { ...timing, ...extra }, (c) => spawned.push(c));
  const sql = <T extends Record<string, unknown>>(text: string, params: unknown[] = []) => queryOnce<T>(env.databaseUrl, text, params);

  beforeAll(async () => {
    env = await createTestEnvironment({ STORAGE_DIR: mkdtempSync(path.join(tmpdir(), 'atelier-crash-')) });
    build = buildAppsForTest(['gateway', 'media']);
  }, 120_000);
  afterAll(async () => {
    for (const c of spawned) if (c.exitCode === null) c.kill('SIGKILL');
    build?.cleanup();
    await env?.cleanup();
  });

  it('releases the reservation of a render whose gateway was killed, after the request could have ended, and charges nothing', async () => {
    const gateway = await start('gateway', 'PORT');
    // The render outlives the gateway: the engine takes 60 s.
    await start('media', 'MEDIA_PORT', { LOCAL_ENGINE_LATENCY_MS: '60000' });
    const base = `http://127.0.0.1:${gateway.port}`;
    const created = await fetch(`${base}/api/admin/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${env.config.ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ username: uniqueName(), credits: '5' }),
    });
    expect(created.status).toBe(201);
    const { api_key: apiKey, namespace } = (await created.json()) as { api_key: string; namespace: string };

    const request = fetch(`${base}/api/ai/images/generate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'local-image', prompt: 'a render nobody will collect' }),
    }).catch((err: Error) => err);
    const [held] = await waitFor(
      async () => {
        const rows = await sql<{ id: string; reference: string; amount: string }>(
          `SELECT r.id::text, r.reference, r.amount::text FROM credit_reservations r JOIN namespaces n ON n.id = r.namespace_id
           WHERE n.name = $1 AND r.status = 'open'`,
          [namespace],
        );
        return rows.length > 0 ? rows : undefined;
      },
      { timeoutMs: 10_000, description: 'the render to hold its reservation' },
    );
    expect(held.reference).toMatch(/^media:\/images\/generate:local-image:/);
    expect(Number(held.amount)).toBeGreaterThan(0);

    gateway.child.kill('SIGKILL');
    const killedAt = Date.now();
    // The client loses its connection: no answer, so nothing may be charged.
    expect(await request).toMatchObject({ message: 'fetch failed' });

    const [closed] = await waitFor(
      async () => {
        const rows = await sql<{ status: string; charged: string | null; age_ms: string }>(
          `SELECT status::text, charged::text, (extract(epoch FROM closed_at - created_at) * 1000)::bigint::text AS age_ms
           FROM credit_reservations WHERE id = $1::uuid AND status <> 'open'`,
          [held.id],
        );
        return rows.length > 0 ? rows : undefined;
      },
      { timeoutMs: 20_000, description: 'the stale sweep to release the reservation' },
    );
    expect({ status: closed.status, charged: Number(closed.charged) }).toEqual({ status: 'released', charged: 0 });
    // Not before the request could have ended: RPC_TIMEOUT_MS + RESERVATION_GRACE_MS after it was taken.
    expect(Number(closed.age_ms)).toBeGreaterThanOrEqual(4500);
    expect(Date.now() - killedAt).toBeLessThan(20_000);

    const [ns] = await sql<{ credits: string; reserved: string; charges: string }>(
      `SELECT n.credits::text, n.reserved::text, (SELECT count(*) FROM credit_ledger l WHERE l.namespace_id = n.id AND l.kind = 'charge')::text AS charges
       FROM namespaces n WHERE n.name = $1`,
      [namespace],
    );
    expect({ credits: Number(ns.credits), reserved: Number(ns.reserved), charges: ns.charges }).toEqual({ credits: 5, reserved: 0, charges: '0' });
  }, 90_000);

  it('answers a render whose media process was killed with a 503 within the lock duration, from another replica, and charges nothing', async () => {
    // The previous test's processes would compete for the call.
    for (const c of spawned) if (c.exitCode === null) c.kill('SIGKILL');
    const lock = { JOB_LOCK_DURATION_MS: '1000', RPC_TIMEOUT_MS: '60000' };
    const gateway = await start('gateway', 'PORT', lock);
    // Two media replicas whose renders outlive the test: one takes the call, the other must answer for it.
    const replicas = [
      await start('media', 'MEDIA_PORT', { ...lock, LOCAL_ENGINE_LATENCY_MS: '60000' }),
      await start('media', 'MEDIA_PORT', { ...lock, LOCAL_ENGINE_LATENCY_MS: '60000' }),
    ];
    const base = `http://127.0.0.1:${gateway.port}`;
    const created = await fetch(`${base}/api/admin/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${env.config.ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ username: uniqueName(), credits: '5' }),
    });
    const { api_key: apiKey, namespace } = (await created.json()) as { api_key: string; namespace: string };
    const answer = fetch(`${base}/api/ai/images/generate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'local-image', prompt: 'a render whose worker dies' }),
    }).then(async (r) => ({ status: r.status, body: (await r.json()) as { error?: { type?: string; message?: string } } }));

    // The consumer name of the replica running the call carries its pid.
    const redis = new Redis(env.redisUrl);
    let owner: AppProcess | undefined;
    try {
      const stream = `${env.prefix}:rpc:media-render-image`;
      owner = await waitFor(
        async () => {
          const pending = (await redis.xpending(stream, 'workers', '-', '+', 10)) as [string, string, number, number][];
          return replicas.find((r) => pending.some(([, consumer]) => consumer.includes(`-${r.child.pid}-`)));
        },
        { timeoutMs: 10_000, description: 'a media replica to take the call' },
      );
    } finally {
      redis.disconnect();
    }
    owner.child.kill('SIGKILL');
    const killedAt = Date.now();
    const outcome = await answer;
    expect(outcome.status).toBe(503);
    expect(outcome.body.error?.message).toMatch(/stopped before it answered/);
    // About the lock duration (1 s) plus a reclaim interval, far from the 60 s call timeout.
    expect(Date.now() - killedAt).toBeLessThan(10_000);
    await waitFor(
      async () => {
        const [ns] = await sql<{ reserved: string; credits: string }>(`SELECT reserved::text, credits::text FROM namespaces WHERE name = $1`, [namespace]);
        return Number(ns.reserved) === 0 && Number(ns.credits) === 5;
      },
      { description: 'the reservation to be released, nothing charged' },
    );
  }, 90_000);
});
