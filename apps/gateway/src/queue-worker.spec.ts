import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { GENERATION_COMPLETED_CHANNEL, IMAGE_GENERATION_QUEUE, type GenerationCompletedEvent } from '@atelier/contracts';
import { PrismaService } from '@atelier/db';
import { BroadcastBus, JobQueues } from '@atelier/runtime';
import { appProcessEnv, buildAppsForTest, createTenant, repoRoot, waitFor, type Tenant } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';

interface Gen {
  generation_id: string;
  status: string;
  result_url: string | null;
  error_message: string | null;
  cost: string | null;
  queue_position: number | null;
  progress: number | null;
}

/** Queued generations end to end: the real gateway in-process, real queue-worker processes. */
describe('queue worker processes', () => {
  let gw: GatewayHarness;
  let build: ReturnType<typeof buildAppsForTest>;
  let user: Tenant;
  const workers: ChildProcess[] = [];
  const events: GenerationCompletedEvent[] = [];

  const startWorker = (extraEnv: Record<string, string> = {}) => {
    const child = spawn(process.execPath, [build.main('queue-worker')], {
      cwd: repoRoot,
      env: appProcessEnv(gw.env, {
        QUEUE_WORKER_PORT: '0',
        JOB_LOCK_DURATION_MS: '1500',
        GENERATION_SWEEP_INTERVAL_MS: '500',
        LOG_LEVEL: 'error',
        ...extraEnv,
      }),
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    workers.push(child);
    return child;
  };
  const enqueue = async (body: Record<string, unknown>, t = user) => {
    const res = await gw.http.request<{ generations: { generation_id: string }[] }>('POST', '/api/ai/queue', { token: t.apiKey, body });
    if (res.status !== 200) throw new Error(`enqueue failed: ${res.status} ${res.text}`);
    return res.body.generations.map((g) => g.generation_id);
  };
  const get = async (id: string, t = user) => (await gw.http.request<Gen>('GET', `/api/ai/queue/${id}`, { token: t.apiKey })).body;
  const finished = (id: string, t = user) =>
    waitFor(
      async () => {
        const g = await get(id, t);
        return ['succeeded', 'failed', 'cancelled'].includes(g.status) ? g : undefined;
      },
      { timeoutMs: 30_000, description: `generation ${id} to finish` },
    );
  const charges = async (t: Tenant) =>
    (await gw.app.get(PrismaService).creditLedgerEntry.findMany({ where: { namespace: { name: t.namespace }, kind: 'charge' } })).map((c) =>
      c.amount.toFixed(),
    );

  beforeAll(async () => {
    build = buildAppsForTest(['queue-worker']);
    gw = await startGateway({ STORAGE_DIR: mkdtempSync(path.join(tmpdir(), 'atelier-worker-')) });
    user = await createTenant(gw.http, gw.adminToken, '1');
    await gw.app.get(BroadcastBus).subscribe(GENERATION_COMPLETED_CHANNEL, (e) => events.push(e));
  });
  afterAll(async () => {
    for (const w of workers) w.kill('SIGKILL');
    await gw?.close();
    build?.cleanup();
  });

  it('runs a queued image to succeeded: real PNG at a signed link, one charge, one event', async () => {
    startWorker();
    const [id] = await enqueue({ model: 'local-image', prompt: 'a lighthouse at dusk', seed: 3, aspect_ratio: '16:9', target_repo: 'art', target_directory: 'coast' });
    const done = await finished(id);
    expect(done).toMatchObject({ status: 'succeeded', error_message: null, cost: '0.01' });
    const link = done.result_url!.replace(/^https?:\/\/[^/]+/, '');
    expect(link).toMatch(new RegExp(`^/files/${user.namespace}/repos/art/coast/`));
    const file = await gw.app.getHttpAdapter().getInstance().inject({ method: 'GET', url: link });
    expect(file.statusCode).toBe(200);
    expect(file.headers['content-type']).toBe('image/png');
    expect(file.rawPayload.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
    await waitFor(() => events.some((e) => e.generation_id === id), { description: 'the completion event' });
    expect(events.filter((e) => e.generation_id === id)).toHaveLength(1);
    expect(await charges(user)).toEqual(['-0.01']);
  });

  it('fails a generation whose model parameter is invalid, naming it, and charges nothing', async () => {
    const [id] = await enqueue({ model: 'local-image', prompt: 'too many steps', num_inference_steps: 500 });
    const done = await finished(id);
    expect(done.status).toBe('failed');
    expect(done.error_message).toMatch(/num_inference_steps/);
    expect(done.cost).toBe('0'); // terminal: what was charged, "0" for a failure
    await waitFor(() => events.some((e) => e.generation_id === id && e.status === 'failed'), { description: 'the failure event' });
    expect((await gw.http.request<{ reserved: string }>('GET', '/api/credits', { token: user.apiKey })).body.reserved).toBe('0');
  });

  it('prices an enqueue from valid parameters only: a negative or absurd duration is accepted, then fails naming it', async () => {
    const t = await createTenant(gw.http, gw.adminToken, '1');
    const prisma = gw.app.get(PrismaService);
    for (const duration of [-5, 1e12]) {
      const [id] = await enqueue({ model: 'local-video', prompt: 'x', duration }, t);
      const reservation = await prisma.creditReservation.findFirstOrThrow({ where: { reference: `generation:${id}` } });
      // Priced at the model's defaults, never negative and never the absurd amount asked for.
      expect(reservation.amount.toNumber()).toBeGreaterThan(0);
      expect(reservation.amount.toNumber()).toBeLessThan(1);
      const done = await finished(id, t);
      expect(done).toMatchObject({ status: 'failed', cost: '0' });
      expect(done.error_message).toMatch(/duration/);
    }
    expect((await gw.http.request<{ credits: string; reserved: string }>('GET', '/api/credits', { token: t.apiKey })).body).toMatchObject({ credits: '1', reserved: '0' });
  }, 40_000);

  it('recovers a generation whose worker was killed: one terminal state, one event, one charge', async () => {
    for (const w of workers.splice(0)) w.kill('SIGKILL');
    const t = await createTenant(gw.http, gw.adminToken, '1');
    const slow = startWorker({ LOCAL_ENGINE_LATENCY_MS: '120000' });
    const [id] = await enqueue({ model: 'local-image', prompt: 'interrupted' }, t);
    await waitFor(async () => (await get(id, t)).status === 'processing', { timeoutMs: 20_000, description: 'the worker to start it' });
    slow.kill('SIGKILL');
    startWorker();
    const done = await finished(id, t);
    expect(done.status).toBe('succeeded');
    await waitFor(() => events.some((e) => e.generation_id === id), { description: 'the completion event' });
    expect(events.filter((e) => e.generation_id === id)).toHaveLength(1);
    expect(await gw.app.get(PrismaService).generationEvent.count({ where: { generationId: id } })).toBe(1);
    expect(await charges(t)).toEqual(['-0.01']);
  }, 60_000);

  it('cancels a generation while it is processing: the engine stops, no event, credits released', async () => {
    for (const w of workers.splice(0)) w.kill('SIGKILL');
    const t = await createTenant(gw.http, gw.adminToken, '1');
    startWorker({ LOCAL_ENGINE_LATENCY_MS: '120000' });
    const [id] = await enqueue({ model: 'local-image', prompt: 'never mind' }, t);
    await waitFor(async () => (await get(id, t)).status === 'processing', { timeoutMs: 20_000, description: 'the worker to start it' });
    const res = await gw.http.request('DELETE', `/api/ai/queue/${id}`, { token: t.apiKey });
    expect(res.body).toEqual({ status: 'success', generation_id: id });
    expect((await get(id, t)).status).toBe('cancelled');
    // The worker was told to abort: its job stops being active long before the 120 s engine delay.
    const queue = gw.app.get(JobQueues).queue(IMAGE_GENERATION_QUEUE);
    await waitFor(async () => (await queue.getJobState(id)) !== 'active', { timeoutMs: 10_000, description: 'the engine to stop' });
    expect((await get(id, t)).status).toBe('cancelled');
    expect(events.some((e) => e.generation_id === id)).toBe(false);
    expect((await gw.http.request<{ credits: string; reserved: string }>('GET', '/api/credits', { token: t.apiKey })).body).toMatchObject({ credits: '1', reserved: '0' });
    expect(await charges(t)).toEqual([]);
  }, 40_000);

  it('tells where a queued generation stands, how far a running one is, and what each cost', async () => {
    for (const w of workers.splice(0)) w.kill('SIGKILL');
    const t = await createTenant(gw.http, gw.adminToken, '1');
    // No worker yet: seven images wait in line, in the order they were enqueued.
    const first = await enqueue({ model: 'local-image', prompt: 'in line', num_generations: 4 }, t);
    const next = await enqueue({ model: 'local-image', prompt: 'behind them', num_generations: 3 }, t);
    const line = [...first, ...next];
    const waiting = await Promise.all(line.map((id) => get(id, t)));
    expect(waiting.map((g) => g.queue_position)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(waiting.every((g) => g.status === 'queued' && g.progress === null && g.cost === null)).toBe(true);
    // The last one is cancelled while it waits: it leaves the line and costs nothing.
    await gw.http.request('DELETE', `/api/ai/queue/${next[2]}`, { token: t.apiKey });
    expect(await get(next[2], t)).toMatchObject({ status: 'cancelled', queue_position: null, progress: null, cost: '0' });
    // The listing carries the same figures.
    const listed = (await gw.http.request<{ generations: Gen[] }>('GET', '/api/ai/queue?status=queued', { token: t.apiKey })).body.generations;
    expect(Object.fromEntries(listed.map((g) => [g.generation_id, g.queue_position]))).toEqual(Object.fromEntries(line.slice(0, 6).map((id, i) => [id, i])));

    // A worker runs four at a time (the pool's concurrency), each engine taking 3 s in 28 steps:
    // the two behind them move to the front of the line.
    startWorker({ LOCAL_ENGINE_LATENCY_MS: '3000' });
    await waitFor(async () => ((await get(next[0], t)).queue_position === 0 && (await get(next[1], t)).queue_position === 1 ? true : undefined), {
      timeoutMs: 20_000,
      description: 'the line to move up',
    });
    const running = await waitFor(
      async () => {
        const g = await get(first[0], t);
        return g.status === 'processing' && g.progress !== null && g.progress > 0 && g.progress < 1 ? g : undefined;
      },
      { timeoutMs: 20_000, description: 'progress from the running engine' },
    );
    expect(running).toMatchObject({ queue_position: null, cost: null });
    const later = await waitFor(
      async () => {
        const g = await get(first[0], t);
        return g.status !== 'processing' || (g.progress ?? 0) > running.progress! ? g : undefined;
      },
      { timeoutMs: 20_000, description: 'progress to grow' },
    );
    expect(later.progress).toBeGreaterThan(running.progress!);
    for (const id of line.slice(0, 6)) expect(await finished(id, t)).toMatchObject({ status: 'succeeded', progress: 1, queue_position: null, cost: '0.01' });
  }, 60_000);
});
