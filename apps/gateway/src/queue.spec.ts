import { CreditLedger } from '@atelier/billing';
import { PrismaService } from '@atelier/db';
import { GenerationState, generationReservationRule, toGenerationRecord } from '@atelier/queue';
import { uuidV7Time } from '@atelier/random';
import { createTenant, nextMillisecond, type Tenant } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';

type Record_ = Record<string, unknown> & { generation_id: string; status: string };
const NOT_FOUND = {
  error: { type: 'resource_not_found', title: 'The requested resource could not be found', message: expect.any(String) },
  status: 'error',
  status_message: 'resource_not_found',
};

describe('generation queue API', () => {
  let gw: GatewayHarness;
  let alice: Tenant;
  let bob: Tenant;
  const enqueue = (t: Tenant, body: Record<string, unknown>) =>
    gw.http.request<{ generations: { generation_id: string; status: string }[] }>('POST', '/api/ai/queue', { token: t.apiKey, body });
  const get = (t: Tenant, id: string) => gw.http.request<Record_>('GET', `/api/ai/queue/${id}`, { token: t.apiKey });
  const balance = async (t: Tenant) =>
    (await gw.http.request<{ credits: string; reserved: string }>('GET', '/api/credits', { token: t.apiKey })).body;

  beforeAll(async () => {
    gw = await startGateway();
    alice = await createTenant(gw.http, gw.adminToken, '1');
    bob = await createTenant(gw.http, gw.adminToken, '1');
  });
  afterAll(() => gw?.close());

  it('enqueues one queued record per generation and reserves their price', async () => {
    const res = await enqueue(alice, { model: 'local-image', prompt: 'a red fox', num_generations: 2, seed: 7, input_image: 'https://example.com/a.png', target_repo: 'pics', target_directory: 'foxes' });
    expect(res.status).toBe(200);
    expect(res.body.generations).toHaveLength(2);
    for (const g of res.body.generations) expect(g).toEqual({ generation_id: expect.stringMatching(/^[0-9a-f-]{36}$/), status: 'queued' });
    expect(await balance(alice)).toMatchObject({ credits: '1', reserved: '0.02' });

    const rec = await get(alice, res.body.generations[0].generation_id);
    expect(rec.status).toBe(200);
    expect(rec.body).toEqual({
      generation_id: res.body.generations[0].generation_id,
      model_name: 'local-image',
      prompt: 'a red fox',
      media_type: 'image',
      status: 'queued',
      result_url: null,
      error_message: null,
      enqueued_at: expect.any(Number),
      started_at: null,
      completed_at: null,
      seed: 7,
      input_image: 'https://example.com/a.png',
      target_namespace: alice.namespace,
      target_repo: 'pics',
      target_directory: 'foxes',
      cost: null,
      // Queued with no worker running: its place in the image pool's line; no progress yet.
      queue_position: expect.any(Number),
      progress: null,
      // Not submitted: the default, echoed.
      priority: 'normal',
    });
    expect(Math.abs((rec.body.enqueued_at as number) - Date.now() / 1000)).toBeLessThan(60);
    // aspect_ratio and duration were not submitted, so they are absent.
    expect(rec.body).not.toHaveProperty('aspect_ratio');
    expect(rec.body).not.toHaveProperty('duration');
  });

  it('gives generations time-ordered ids (UUID version 7), so later ones sort after earlier ones', async () => {
    const first = await enqueue(alice, { model: 'local-image', prompt: 'first', num_generations: 2 });
    await nextMillisecond();
    const now = Date.now();
    const second = await enqueue(alice, { model: 'local-image', prompt: 'second' });
    const ids = [...first.body.generations, ...second.body.generations].map((g) => g.generation_id);
    for (const id of ids) expect(Math.abs(uuidV7Time(id)! - now)).toBeLessThan(60_000);
    expect(second.body.generations[0].generation_id > first.body.generations[0].generation_id).toBe(true);
    expect(second.body.generations[0].generation_id > first.body.generations[1].generation_id).toBe(true);
    // The record tells the same time as its id.
    const rec = await get(alice, ids[2]);
    expect(Math.abs((rec.body.enqueued_at as number) * 1000 - uuidV7Time(ids[2])!)).toBeLessThan(5_000);
  });

  it.each([
    [{ prompt: 'x' }, 400, /You must specify a model/],
    [{ model: 'nope', prompt: 'x' }, 404, /^Model not found: nope$/],
    [{ model: 'local-chat', prompt: 'x' }, 400, /image and video models/],
    [{ model: 'local-image', prompt: 'x', num_generations: 0 }, 400, /^num_generations must be an integer between 1 and 4$/],
    [{ model: 'local-image', prompt: 'x', num_generations: 5 }, 400, /^num_generations must be an integer between 1 and 4$/],
    [{ model: 'local-image', prompt: 'x', num_generations: 1.5 }, 400, /^num_generations must be an integer between 1 and 4$/],
    [{ model: 'local-image', prompt: 'x', num_generations: '2' }, 400, /^num_generations must be an integer between 1 and 4$/],
  ])('rejects %j at enqueue and creates nothing', async (body, status, message) => {
    const before = await gw.http.request<{ count: number }>('GET', '/api/ai/queue', { token: bob.apiKey });
    const res = await enqueue(bob, body);
    expect(res.status).toBe(status);
    expect(res.body).toMatchObject({ status: 'error', error: { message: expect.stringMatching(message) } });
    const after = await gw.http.request<{ count: number }>('GET', '/api/ai/queue', { token: bob.apiKey });
    expect(after.body.count).toBe(before.body.count);
  });

  it('keeps prompts and parameters exactly as sent, whatever characters they hold, also when enqueued together', async () => {
    const prompt = 'a "quoted" {fox}, back\\slash, comma, NULL, 日本語 🦊\nsecond line';
    const bodies = [
      { model: 'local-image', prompt, style: { tags: ['a,b', '"c"', '{d}'], weight: 0.5, none: null }, note: 'NULL' },
      { model: 'local-image', prompt: '', target_repo: 'r,{"}', target_directory: 'dir\\x' },
      { model: 'local-image', prompt: 'plain' },
    ];
    const made = await Promise.all(bodies.map((b) => enqueue(bob, b)));
    for (const [i, res] of made.entries()) {
      expect(res.status).toBe(200);
      const rec = (await get(bob, res.body.generations[0].generation_id)).body;
      const { model, ...fields } = bodies[i];
      expect(rec).toMatchObject({ model_name: model, ...fields });
    }
    expect((await get(bob, made[1].body.generations[0].generation_id)).body).toMatchObject({ prompt: '', target_repo: 'r,{"}', target_directory: 'dir\\x' });
    expect((await get(bob, made[2].body.generations[0].generation_id)).body).toMatchObject({ target_repo: null, target_directory: null });
  });

  it('does not validate model parameters at enqueue', async () => {
    const res = await enqueue(bob, { model: 'local-image', prompt: 'x', num_inference_steps: 500 });
    expect(res.status).toBe(200);
  });

  it('refuses foreign target namespaces (403) and insufficient credits (402), atomically', async () => {
    expect((await enqueue(alice, { model: 'local-image', prompt: 'x', target_namespace: bob.namespace })).status).toBe(403);
    const poor = await createTenant(gw.http, gw.adminToken, '0.03');
    const res = await enqueue(poor, { model: 'local-image', prompt: 'x', num_generations: 4 });
    expect(res.status).toBe(402);
    expect(res.body).toMatchObject({ error: { type: 'insufficient_credits', message: expect.stringMatching(/Insufficient credits/) } });
    // None of the four was created or reserved: the three that fit were rolled back too.
    expect(await balance(poor)).toMatchObject({ credits: '0.03', reserved: '0' });
    expect((await gw.http.request<{ count: number }>('GET', '/api/ai/queue', { token: poor.apiKey })).body.count).toBe(0);
  });

  it('never overspends under concurrent enqueues', async () => {
    const t = await createTenant(gw.http, gw.adminToken, '0.1');
    const results = await Promise.all(Array.from({ length: 25 }, () => enqueue(t, { model: 'local-image', prompt: 'x' })));
    expect(results.filter((r) => r.status === 200)).toHaveLength(10);
    expect(results.filter((r) => r.status === 402)).toHaveLength(15);
    expect(await balance(t)).toMatchObject({ credits: '0.1', reserved: '0.1' });
  });

  it('answers unknown and foreign ids with the exact 404 body', async () => {
    const mine = (await enqueue(alice, { model: 'local-image', prompt: 'secret' })).body.generations[0].generation_id;
    for (const url of [`/api/ai/queue/${mine}`, '/api/ai/queue/00000000-0000-4000-8000-000000000000', '/api/ai/queue/not-a-uuid']) {
      const res = await gw.http.request('GET', url, { token: bob.apiKey });
      expect(res.status).toBe(404);
      expect(res.body).toEqual(NOT_FOUND);
      const del = await gw.http.request('DELETE', url, { token: bob.apiKey });
      expect(del.status).toBe(404);
      expect(del.body).toEqual(NOT_FOUND);
    }
  });

  it('tells a first start from a redelivered one, so the queue-wait metric observes each generation once', async () => {
    const t = await createTenant(gw.http, gw.adminToken, '10');
    const id = (await enqueue(t, { model: 'local-image', prompt: 'once' })).body.generations[0].generation_id;
    const state = gw.app.get(GenerationState);
    expect((await state.start(id))?.firstStart).toBe(true);
    // A worker died and BullMQ hands the job to another: the same row, not a first start.
    expect((await state.start(id))?.firstStart).toBe(false);
  });

  it('lists active generations by default, terminal ones on request, with filters and paging', async () => {
    const t = await createTenant(gw.http, gw.adminToken, '10');
    const img = (await enqueue(t, { model: 'local-image', prompt: 'one', target_repo: 'r1', target_directory: 'd1' })).body.generations[0].generation_id;
    const vid = (await enqueue(t, { model: 'local-video', prompt: 'two', duration: 2 })).body.generations[0].generation_id;
    const done = (await enqueue(t, { model: 'local-image', prompt: 'three' })).body.generations[0].generation_id;
    const state = gw.app.get(GenerationState);
    await state.start(done);
    await state.succeed(done, [`${t.namespace}/outputs/${done}.png`], '0.01');

    const list = async (q: string) =>
      (await gw.http.request<{ count: number; generations: Record_[] }>('GET', `/api/ai/queue${q}`, { token: t.apiKey })).body;
    const active = await list('');
    expect(active.count).toBe(2);
    expect(active.generations.map((g) => g.generation_id)).toEqual([vid, img]); // newest first
    expect((await list('?status=succeeded')).generations.map((g) => g.generation_id)).toEqual([done]);
    expect((await list('?media_type=video')).generations.map((g) => g.generation_id)).toEqual([vid]);
    expect((await list('?model=local-image')).generations.map((g) => g.generation_id)).toEqual([img]);
    expect((await list('?repo=r1')).generations.map((g) => g.generation_id)).toEqual([img]);
    expect((await list('?folder=d1')).generations.map((g) => g.generation_id)).toEqual([img]);
    const page = await list('?limit=1&offset=1');
    expect(page.count).toBe(2);
    expect(page.generations.map((g) => g.generation_id)).toEqual([img]);
    expect(await list('?offset=5')).toMatchObject({ count: 2, generations: [], offset: 5 });
    expect(await list('?status=failed')).toMatchObject({ count: 0, generations: [] });
    expect((await gw.http.request('GET', '/api/ai/queue?limit=1000', { token: t.apiKey })).status).toBe(400);
    expect((await gw.http.request('GET', '/api/ai/queue?status=done', { token: t.apiKey })).status).toBe(400);
    // Several statuses, or all of them, in one request (the console's gallery).
    expect((await list('?status=succeeded,queued')).generations.map((g) => g.generation_id)).toEqual([done, vid, img]);
    expect(await list('?status=all')).toMatchObject({ count: 3 });
    expect((await gw.http.request('GET', '/api/ai/queue?status=succeeded,done', { token: t.apiKey })).status).toBe(400);
    expect((await gw.http.request('GET', '/api/ai/queue?status=succeeded,', { token: t.apiKey })).status).toBe(400);
    expect((await gw.http.request('GET', `/api/ai/queue?namespace=${alice.namespace}`, { token: t.apiKey })).status).toBe(403);

    const succeeded = (await get(t, done)).body;
    expect(succeeded).toMatchObject({ status: 'succeeded', cost: '0.01', error_message: null });
    expect(succeeded.result_url).toMatch(/\/files\/.*\?expires=\d+&signature=/);
    expect(succeeded.completed_at).toEqual(expect.any(Number));
    expect(succeeded.started_at).toEqual(expect.any(Number));
  });

  it('shows a generation in every state the same whether read alone or in the list', async () => {
    // The two reads are separate statements (each kept lean: clients poll them), so a record must
    // not depend on which one served it: dates, costs, echoed parameters, live fields.
    const t = await createTenant(gw.http, gw.adminToken, '10');
    const params = { seed: 42, aspect_ratio: '16:9', style: { tags: ['a', 'b'], weight: 0.25, none: null }, target_repo: 'pics', target_directory: 'a/b' };
    const ids: Record<string, string> = {};
    for (const status of ['queued', 'processing', 'succeeded', 'failed', 'cancelled'])
      ids[status] = (await enqueue(t, { model: 'local-image', prompt: `${status} fox`, ...params })).body.generations[0].generation_id;
    const state = gw.app.get(GenerationState);
    for (const status of ['processing', 'succeeded', 'failed']) await state.start(ids[status]);
    await state.succeed(ids.succeeded, [`${t.namespace}/outputs/${ids.succeeded}.png`], '0.123456');
    await state.fail(ids.failed, 'the engine gave up');
    expect((await gw.http.request('DELETE', `/api/ai/queue/${ids.cancelled}`, { token: t.apiKey })).status).toBe(200);

    for (const [status, id] of Object.entries(ids)) {
      const listed = (await gw.http.request<{ generations: Record_[] }>('GET', `/api/ai/queue?status=${status}`, { token: t.apiKey })).body.generations;
      expect(listed).toHaveLength(1);
      const alone = await get(t, id);
      expect(alone.status).toBe(200);
      expect({ status, record: alone.body }).toEqual({ status, record: listed[0] });
      expect(alone.body).toMatchObject({ generation_id: id, status, seed: 42, style: params.style, target_namespace: t.namespace, target_repo: 'pics' });
      // Webhook payloads build the record from the Prisma row instead: the same times (whole
      // seconds, rounded down), cost and parameters as the reads clients poll.
      const row = await gw.app.get(PrismaService).generation.findUniqueOrThrow({ where: { id } });
      const { result_url: _url, queue_position: _position, progress: _progress, ...stored } = toGenerationRecord(row, t.namespace, () => '');
      expect({ status, record: alone.body }).toEqual({ status, record: { ...stored, result_url: alone.body.result_url, queue_position: alone.body.queue_position, progress: alone.body.progress } });
    }
    expect((await get(t, ids.succeeded)).body).toMatchObject({ cost: '0.123456', progress: 1, result_url: expect.stringMatching(/\/files\//) });
    expect((await get(t, ids.failed)).body).toMatchObject({ cost: '0', error_message: 'the engine gave up', result_url: null });
  });

  it('cancels queued generations, releases their credits, and leaves terminal ones alone', async () => {
    const t = await createTenant(gw.http, gw.adminToken, '1');
    const id = (await enqueue(t, { model: 'local-image', prompt: 'cancel me' })).body.generations[0].generation_id;
    expect(await balance(t)).toMatchObject({ reserved: '0.01' });
    const res = await gw.http.request('DELETE', `/api/ai/queue/${id}`, { token: t.apiKey });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'success', generation_id: id });
    expect((await get(t, id)).body).toMatchObject({ status: 'cancelled', completed_at: expect.any(Number) });
    expect(await balance(t)).toMatchObject({ credits: '1', reserved: '0' });

    // A worker finishing a moment later cannot revive it.
    const state = gw.app.get(GenerationState);
    expect(await state.succeed(id, ['x/y.png'], '0.01')).toBe(false);
    expect((await get(t, id)).body.status).toBe('cancelled');

    // Cancelling a terminal generation changes nothing.
    const again = await gw.http.request('DELETE', `/api/ai/queue/${id}`, { token: t.apiKey });
    expect(again.body).toEqual({ status: 'success', generation_id: id });
    expect((await get(t, id)).body.status).toBe('cancelled');
    expect(await balance(t)).toMatchObject({ credits: '1', reserved: '0' });
  });

  it('releases a reservation whose generation rows were never written (crash between the two steps)', async () => {
    const t = await createTenant(gw.http, gw.adminToken, '1');
    const prisma = gw.app.get(PrismaService);
    const ns = await prisma.namespace.findUniqueOrThrow({ where: { name: t.namespace } });
    const orphan = await gw.app.get(CreditLedger).reserve(ns.id, '0.01', 'generation:00000000-0000-4000-8000-000000000001');
    const id = (await enqueue(t, { model: 'local-image', prompt: 'kept' })).body.generations[0].generation_id;
    await prisma.$executeRaw`UPDATE credit_reservations SET created_at = now() - interval '1 hour' WHERE namespace_id = ${ns.id}::uuid`;
    expect(await gw.app.get(CreditLedger).releaseStale(generationReservationRule(gw.app.get(GenerationState), 60_000))).toBe(1);
    expect((await prisma.creditReservation.findUniqueOrThrow({ where: { id: orphan.id } })).status).toBe('released');
    // The enqueued generation keeps its reservation.
    expect(await balance(t)).toMatchObject({ credits: '1', reserved: '0.01' });
    expect((await get(t, id)).body.status).toBe('queued');
  });
});
