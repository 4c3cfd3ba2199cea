import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { GENERATION_COMPLETED_CHANNEL, IMAGE_GENERATION_QUEUE, QUEUE_WEIGHTS_KEY } from '@atelier/contracts';
import { PrismaService } from '@atelier/db';
import { BroadcastBus, RedisService } from '@atelier/runtime';
import { appProcessEnv, buildAppsForTest, createTenant, repoRoot, waitFor, type Tenant } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';

interface Row {
  id: string;
  namespace: string;
  enqueuedAt: Date;
  startedAt: Date | null;
  completedAt: Date | null;
  status: string;
}

/**
 * Fair scheduling across namespaces, end to end: the real gateway in-process, real queue-worker
 * processes rendering real images, one tenant's backlog beside others' few generations.
 */
describe('fair scheduling of queued generations', () => {
  let gw: GatewayHarness;
  let build: ReturnType<typeof buildAppsForTest>;
  const workers: ChildProcess[] = [];
  /** Slots one worker runs at once: a newcomer waits at most one round of them per job-time. */
  const SLOTS = IMAGE_GENERATION_QUEUE.settings.concurrency;

  const startWorker = (env: Record<string, string> = {}) => {
    const child = spawn(process.execPath, [build.main('queue-worker')], {
      cwd: repoRoot,
      env: appProcessEnv(gw.env, { QUEUE_WORKER_PORT: '0', QUEUE_WORKER_POOLS: 'image', JOB_LOCK_DURATION_MS: '1500', GENERATION_SWEEP_INTERVAL_MS: '500', LOG_LEVEL: 'error', ...env }),
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    workers.push(child);
    return child;
  };
  const stopWorkers = async (signal: NodeJS.Signals = 'SIGTERM') => {
    const running = workers.splice(0).filter((w) => w.exitCode === null && w.signalCode === null);
    await Promise.all(running.map((w) => new Promise((r) => (w.once('exit', r), w.kill(signal)))));
  };
  /** `count` generations of `t`, four to a request, as a batch job would send them. */
  const enqueue = async (t: Tenant, count: number, extra: Record<string, unknown> = {}) => {
    const ids: string[] = [];
    for (let left = count; left > 0; left -= 4) {
      const res = await gw.http.request<{ generations: { generation_id: string }[] }>('POST', '/api/ai/queue', {
        token: t.apiKey,
        body: { model: 'local-image', prompt: 'fair', width: 64, height: 64, num_generations: Math.min(4, left), ...extra },
      });
      if (res.status !== 200) throw new Error(`enqueue failed: ${res.status} ${res.text}`);
      ids.push(...res.body.generations.map((g) => g.generation_id));
    }
    return ids;
  };
  const rows = async (tenants: Tenant[]): Promise<Row[]> => {
    const found = await gw.app.get(PrismaService).generation.findMany({
      where: { namespace: { name: { in: tenants.map((t) => t.namespace) } } },
      select: { id: true, enqueuedAt: true, startedAt: true, completedAt: true, status: true, namespace: { select: { name: true } } },
    });
    return found.map((r) => ({ ...r, namespace: r.namespace.name }));
  };
  const allDone = (tenants: Tenant[], total: number) =>
    waitFor(
      async () => {
        const all = await rows(tenants);
        return all.length === total && all.every((r) => r.status === 'succeeded') ? all : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 250, description: `${total} generations to succeed` },
    );
  /**
   * The ids of the completion events seen, by generation: a generation that ran twice would end
   * twice, with two event ids (an event the outbox sweeper publishes again keeps its id).
   */
  const ended = new Map<string, Set<string | undefined>>();
  /** Each generation ended once and was charged once. */
  const ranOnce = async (tenants: Tenant[], ids: string[]) => {
    await waitFor(() => ids.every((id) => ended.has(id)), { description: 'every completion event' });
    expect(ids.filter((id) => ended.get(id)!.size !== 1)).toEqual([]);
    const charged = await gw.app.get(PrismaService).creditLedgerEntry.count({ where: { kind: 'charge', namespace: { name: { in: tenants.map((t) => t.namespace) } } } });
    expect(charged).toBe(ids.length);
  };
  const setWeight = async (t: Tenant, weight: number) => {
    const res = await gw.http.request('PUT', `/api/admin/namespaces/${t.namespace}/limits`, { token: gw.adminToken, body: { queue_weight: weight } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ limits: { queue_weight: weight } });
  };
  const namespaceId = async (t: Tenant) => (await gw.app.get(PrismaService).namespace.findUnique({ where: { name: t.namespace }, select: { id: true } }))?.id;
  const startOrder = (all: Row[]) => [...all].sort((a, b) => a.startedAt!.getTime() - b.startedAt!.getTime() || a.id.localeCompare(b.id));

  beforeAll(async () => {
    build = buildAppsForTest(['queue-worker']);
    gw = await startGateway({ STORAGE_DIR: mkdtempSync(path.join(tmpdir(), 'atelier-fair-')) });
    await gw.app.get(BroadcastBus).subscribe(GENERATION_COMPLETED_CHANNEL, (e) => ended.set(e.generation_id, (ended.get(e.generation_id) ?? new Set()).add(e.event_id)));
  });
  afterEach(() => stopWorkers('SIGKILL'));
  afterAll(async () => {
    await gw?.close();
    build?.cleanup();
  });

  it("serves a newcomer within two job-times of a 200-generation backlog, and a third tenant's four before the backlog's fortieth; all run once", async () => {
    const [a, b, c] = await Promise.all([createTenant(gw.http, gw.adminToken, '10'), createTenant(gw.http, gw.adminToken, '10'), createTenant(gw.http, gw.adminToken, '10')]);
    startWorker();
    const aIds = await enqueue(a, 200);
    // The worker is well into A's backlog when B and C arrive.
    await waitFor(async () => (await rows([a])).filter((r) => r.startedAt).length >= 8, { description: "A's first generations to start" });
    const [bId] = await enqueue(b, 1);
    const cIds = await enqueue(c, 4);
    const all = await allDone([a, b, c], 205);

    const order = startOrder(all);
    const bRow = all.find((r) => r.id === bId)!;
    // Started between B's enqueue and B's own start: at most two rounds of the worker's slots.
    const before = order.filter((r) => r.startedAt! > bRow.enqueuedAt && r.startedAt! < bRow.startedAt!).length;
    expect(before).toBeLessThanOrEqual(2 * SLOTS);
    const aFinished = all.filter((r) => r.namespace === a.namespace).map((r) => r.completedAt!.getTime()).sort((x, y) => x - y);
    const cLast = Math.max(...all.filter((r) => cIds.includes(r.id)).map((r) => r.completedAt!.getTime()));
    expect(cLast).toBeLessThanOrEqual(aFinished[39]);
    await ranOnce([a, b, c], [...aIds, bId, ...cIds]);
  }, 180_000);

  it('keeps the fair order and runs each generation once across a worker killed mid-backlog', async () => {
    const [a, b] = await Promise.all([createTenant(gw.http, gw.adminToken, '10'), createTenant(gw.http, gw.adminToken, '10')]);
    const aIds = await enqueue(a, 120);
    const worker = startWorker();
    await waitFor(async () => (await rows([a])).filter((r) => r.status === 'succeeded').length >= 20, { description: 'A to be under way' });
    worker.kill('SIGKILL');
    await new Promise((r) => worker.once('exit', r));
    // B arrives while no worker runs; the next worker must still take it before the rest of A's backlog.
    const [bId] = await enqueue(b, 1);
    startWorker();
    const all = await allDone([a, b], 121);
    const order = startOrder(all);
    const bRow = all.find((r) => r.id === bId)!;
    const before = order.filter((r) => r.startedAt! > bRow.enqueuedAt && r.startedAt! < bRow.startedAt!).length;
    // A's jobs the killed worker held come back first (their place was earlier), then B.
    expect(before).toBeLessThanOrEqual(3 * SLOTS);
    await ranOnce([a, b], [...aIds, bId]);
  }, 180_000);

  it('shares the workers by weight: at 3 to 1, A runs about three generations for each of B', async () => {
    const [a, b] = await Promise.all([createTenant(gw.http, gw.adminToken, '10'), createTenant(gw.http, gw.adminToken, '10')]);
    await setWeight(a, 3);
    // Both backlogged before any worker runs, so every start is a choice between them.
    await enqueue(a, 100);
    await enqueue(b, 100);
    // The operator sees both backlogs, and the weights they are served by.
    const view = await gw.http.request<{ pools: { pool: string; namespaces: { namespace: string; queue_weight: number; queued: number; processing: number }[] }[] }>('GET', '/api/admin/queues', { token: gw.adminToken });
    expect(view.status).toBe(200);
    const image = view.body.pools.find((p) => p.pool === 'image')!;
    expect(image.namespaces.filter((n) => n.namespace === a.namespace || n.namespace === b.namespace)).toEqual([
      { namespace: a.namespace, queue_weight: 3, queued: 100, processing: 0 },
      { namespace: b.namespace, queue_weight: 1, queued: 100, processing: 0 },
    ].sort((x, y) => (x.namespace < y.namespace ? -1 : 1)));
    expect((await gw.http.request('GET', '/api/admin/queues', { token: a.apiKey })).status).toBe(401);
    startWorker();
    const all = await allDone([a, b], 200);
    const first100 = startOrder(all).slice(0, 100);
    const ofA = first100.filter((r) => r.namespace === a.namespace).length;
    // 75 of the first 100 at 3:1, within 20 %.
    expect(ofA).toBeGreaterThanOrEqual(60);
    expect(ofA).toBeLessThanOrEqual(90);
    // Redis losing the weights while the worker runs (a restart without persistence): its next
    // sweep restores them from Postgres.
    const redis = gw.app.get(RedisService);
    await redis.client.del(redis.names.key(QUEUE_WEIGHTS_KEY));
    await waitFor(async () => (await redis.client.hget(redis.names.key(QUEUE_WEIGHTS_KEY), (await namespaceId(a))!)) === '3', { description: 'the weight to be restored' });
  }, 180_000);

  it("orders a namespace's own generations by priority without taking places from another namespace", async () => {
    const [a, b] = await Promise.all([createTenant(gw.http, gw.adminToken, '10'), createTenant(gw.http, gw.adminToken, '10')]);
    const aNormal = await enqueue(a, 40);
    await enqueue(b, 40);
    const aHigh = await enqueue(a, 4, { priority: 'high' });
    const aLow = await enqueue(a, 4, { priority: 'low' });
    const record = async (id: string) => (await gw.http.request<{ priority: string; queue_position: number }>('GET', `/api/ai/queue/${id}`, { token: a.apiKey })).body;
    // A's high generations take A's first four places; A's normal ones each moved four on, behind
    // B's first four: the positions promise what the workers will do.
    expect(await record(aHigh[0])).toMatchObject({ priority: 'high', queue_position: 0 });
    expect(await record(aNormal[0])).toMatchObject({ priority: 'normal', queue_position: 8 });
    expect(await record(aLow[3])).toMatchObject({ priority: 'low', queue_position: 87 });
    startWorker();
    const all = await allDone([a, b], 88);
    const order = startOrder(all);
    const ofA = order.filter((r) => r.namespace === a.namespace).map((r) => r.id);
    expect(new Set(ofA.slice(0, 4))).toEqual(new Set(aHigh));
    expect(new Set(ofA.slice(-4))).toEqual(new Set(aLow));
    // B keeps every other place: about half of the first forty starts, as without priorities.
    const bEarly = order.slice(0, 40).filter((r) => r.namespace === b.namespace).length;
    expect(bEarly).toBeGreaterThanOrEqual(16);
    expect(bEarly).toBeLessThanOrEqual(24);
    const bad = await gw.http.request<{ error: { message: string } }>('POST', '/api/ai/queue', { token: a.apiKey, body: { model: 'local-image', prompt: 'x', priority: 'urgent' } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toBe('priority must be one of high, normal, low');
  }, 180_000);

  it("holds a namespace to QUEUE_NAMESPACE_MAX_SHARE of a worker's slots while another waits, and lets a lone burst take them all", async () => {
    const [a, b] = await Promise.all([createTenant(gw.http, gw.adminToken, '10'), createTenant(gw.http, gw.adminToken, '10')]);
    // At weight 3 A would take three of every four starts; the share of 50 % holds it to half the slots.
    await setWeight(a, 3);
    const big = { width: 1024, height: 1024 };
    await enqueue(a, 40, big);
    await enqueue(b, 40, big);
    startWorker({ QUEUE_NAMESPACE_MAX_SHARE: '50' });
    const all = await allDone([a, b], 80);
    const ofA = all.filter((r) => r.namespace === a.namespace);
    const bLastStart = Math.max(...all.filter((r) => r.namespace === b.namespace).map((r) => r.startedAt!.getTime()));
    // Whenever A started one while B still had generations waiting, A ran at most half the slots.
    const cap = SLOTS / 2;
    const crowded = ofA
      .filter((r) => r.startedAt!.getTime() < bLastStart)
      .map((r) => ofA.filter((o) => o.startedAt! <= r.startedAt! && o.completedAt! > r.startedAt!).length);
    expect(Math.max(...crowded)).toBeLessThanOrEqual(cap);
    // A lone namespace is not held back: its burst runs on every slot.
    const c = await createTenant(gw.http, gw.adminToken, '10');
    await enqueue(c, 16, big);
    const cRows = await allDone([c], 16);
    const overlap = Math.max(...cRows.map((r) => cRows.filter((o) => o.startedAt! <= r.startedAt! && o.completedAt! > r.startedAt!).length));
    expect(overlap).toBeGreaterThan(cap);
  }, 180_000);

  it('gives a cancelled generation\'s place back to its namespace: its next one does not wait behind places nobody holds', async () => {
    const [a, b] = await Promise.all([createTenant(gw.http, gw.adminToken, '10'), createTenant(gw.http, gw.adminToken, '10')]);
    const aFirst = await enqueue(a, 8);
    await enqueue(b, 8);
    // A cancels its last four while they wait: a1 b1 a2 b2 a3 b3 a4 b4 b5 b6 b7 b8 remain.
    for (const id of aFirst.slice(4)) expect((await gw.http.request('DELETE', `/api/ai/queue/${id}`, { token: a.apiKey })).status).toBe(200);
    const [next] = await enqueue(a, 1);
    const position = async (id: string) => (await gw.http.request<{ queue_position: number }>('GET', `/api/ai/queue/${id}`, { token: a.apiKey })).body.queue_position;
    // The place of A's fifth (after B's fifth, with which it shares a round), not behind all of B's.
    expect(await position(next)).toBe(9);
  });

  it('refuses a weight outside 1..100 with the error envelope', async () => {
    const t = await createTenant(gw.http, gw.adminToken, '1');
    for (const bad of [0, 101, 1.5, 'heavy']) {
      const res = await gw.http.request<{ status_message: string; error: { message: string } }>('PUT', `/api/admin/namespaces/${t.namespace}/limits`, {
        token: gw.adminToken,
        body: { queue_weight: bad },
      });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ status: 'error', status_message: 'invalid_request' });
      expect(res.body.error.message).toMatch(/queue_weight/);
    }
  });
});
