import { PrismaService } from '@atelier/db';
import { chatUsageRows, createTenant, waitFor, type Tenant } from '@atelier/testing';
import { startChatStack, type ChatStack } from './chat.harness';

/** Idempotency-Key (Stripe's semantics) through the listening gateway, a chat service and a fake upstream. */
describe('Idempotency-Key', () => {
  let stack: ChatStack;
  let prisma: PrismaService;
  const IN_PRICE = 0.00001;
  const OUT_PRICE = 0.00003;

  beforeAll(async () => {
    stack = await startChatStack();
    prisma = stack.gw.app.get(PrismaService);
  });
  afterAll(() => stack?.close());

  const post = (path: string, tenant: Tenant, body: unknown, key?: string) =>
    fetch(`${stack.base}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json', ...(key !== undefined ? { 'idempotency-key': key } : {}) },
      body: JSON.stringify(body),
    });
  const chat = (tenant: Tenant, body: Record<string, unknown>, key?: string) => post('/api/ai/chat/completions', tenant, body, key);
  const echo = (text: string) => ({ model: 'remote-echo', messages: [{ role: 'user', content: text }], max_tokens: 50 });
  const balance = async (t: Tenant) => (await stack.gw.http.request<{ credits: string; reserved: string }>('GET', '/api/credits', { token: t.apiKey })).body;
  const settled = (t: Tenant) => waitFor(async () => ((b) => (b.reserved === '0' ? b : undefined))(await balance(t)), { description: 'the charge to be settled' });
  const upstreamCalls = (text: string) => stack.upstream.requests.filter((r) => JSON.stringify(r.body).includes(text)).length;
  /** Usage rows land with the charge: every request settled so far has its row. */
  const usageRows = async (t: Tenant) => {
    await settled(t);
    return (await chatUsageRows(prisma, { namespace: t.namespace })).length;
  };
  const key = () => `key-${Math.random().toString(36).slice(2)}`;

  it('answers a retry with the stored answer, byte for byte, without running or charging it again', async () => {
    const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const k = key();
    const first = await chat(payer, echo('replay me'), k);
    const firstBody = await first.text();
    expect(first.status).toBe(200);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    await settled(payer);

    // Keys reordered and spaced differently: the same request.
    const again = await fetch(`${stack.base}/api/ai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${payer.apiKey}`, 'content-type': 'application/json', 'idempotency-key': k },
      body: `{ "max_tokens": 50, "messages": [{"content": "replay me", "role": "user"}], "model": "remote-echo" }`,
    });
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('content-type')).toBe(first.headers.get('content-type'));
    expect(await again.text()).toBe(firstBody);

    expect(upstreamCalls('replay me')).toBe(1);
    expect(await usageRows(payer)).toBe(1);
    expect(await balance(payer)).toMatchObject({ credits: String(Number((1 - (21 * IN_PRICE + 9 * OUT_PRICE)).toFixed(6))), reserved: '0' });
  });

  it('refuses the same key with another body or on another route (422), and leaves the stored answer alone', async () => {
    const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const k = key();
    expect((await chat(payer, echo('first body'), k)).status).toBe(200);

    const otherBody = await chat(payer, echo('second body'), k);
    expect(otherBody.status).toBe(422);
    expect(await otherBody.json()).toMatchObject({
      error: { type: 'idempotency_key_reused', message: expect.stringMatching(/already used with a different request/) },
      status: 'error',
      status_message: 'idempotency_key_reused',
    });
    const otherRoute = await post('/api/ai/queue', payer, { model: 'local-image', prompt: 'first body' }, k);
    expect(otherRoute.status).toBe(422);
    expect(((await otherRoute.json()) as { error: { type: string } }).error.type).toBe('idempotency_key_reused');
    expect(upstreamCalls('second body')).toBe(0);
    expect(await prisma.generation.count({ where: { namespace: { name: payer.namespace } } })).toBe(0);

    const original = await chat(payer, echo('first body'), k);
    expect(original.headers.get('idempotent-replayed')).toBe('true');
  });

  it('answers 409 while the first request with the key runs, and does not store a 5xx: a retry runs again', async () => {
    const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const k = key();
    // remote-hang's upstream never answers; the chat service gives up after 300 ms (504).
    const body = { model: 'remote-hang', messages: [{ role: 'user', content: 'wait for it' }], max_tokens: 10 };
    const running = chat(payer, body, k);
    await waitFor(async () => (upstreamCalls('wait for it') > 0 ? true : undefined), { description: 'the first request to reach the upstream' });
    const meanwhile = await chat(payer, body, k);
    expect(meanwhile.status).toBe(409);
    expect(await meanwhile.json()).toMatchObject({ error: { type: 'idempotency_key_in_use', message: expect.stringMatching(/still running/) } });

    const first = await running;
    expect(first.status).toBe(504);
    const retry = await chat(payer, body, k);
    expect(retry.status).toBe(504);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    expect(upstreamCalls('wait for it')).toBe(2);
    expect(await settled(payer)).toMatchObject({ credits: '1' });
  });

  it('runs and charges exactly one of 20 concurrent identical requests; the rest get 409 or the same answer', async () => {
    const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const k = key();
    const answers = await Promise.all(
      Array.from({ length: 20 }, async () => {
        const res = await chat(payer, echo('all at once'), k);
        return { status: res.status, replayed: res.headers.get('idempotent-replayed'), body: await res.text() };
      }),
    );
    const ok = answers.filter((a) => a.status === 200);
    expect(answers.every((a) => a.status === 200 || a.status === 409)).toBe(true);
    expect(ok.filter((a) => a.replayed === null)).toHaveLength(1);
    expect(new Set(ok.map((a) => a.body)).size).toBe(1);
    await settled(payer);
    expect(upstreamCalls('all at once')).toBe(1);
    expect(await usageRows(payer)).toBe(1);
    expect(await balance(payer)).toMatchObject({ credits: String(Number((1 - (21 * IN_PRICE + 9 * OUT_PRICE)).toFixed(6))) });
  });

  it('replays an enqueue with the same generation ids and reserves once', async () => {
    const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const k = key();
    const body = { model: 'local-image', prompt: 'queued once', num_generations: 2 };
    const first = await post('/api/ai/queue', payer, body, k);
    expect(first.status).toBe(200);
    const firstBody = await first.json();
    const again = await post('/api/ai/queue', payer, body, k);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.json()).toEqual(firstBody);
    expect(await prisma.generation.count({ where: { namespace: { name: payer.namespace } } })).toBe(2);
    const reservations = await prisma.creditReservation.count({ where: { namespace: { name: payer.namespace } } });
    expect(reservations).toBe(2);
  });

  it('stores a refusal too: a 402 is answered again although credits arrived meanwhile (use a new key to retry)', async () => {
    const poor = await createTenant(stack.gw.http, stack.gw.adminToken, '0');
    const k = key();
    const refused = await chat(poor, echo('no money'), k);
    expect(refused.status).toBe(402);
    await stack.gw.http.request('POST', `/api/admin/namespaces/${poor.namespace}/credits`, { token: stack.gw.adminToken, body: { amount: '1' } });
    const again = await chat(poor, echo('no money'), k);
    expect(again.status).toBe(402);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect((await chat(poor, echo('no money'), key())).status).toBe(200);
  });

  it.each([
    ['longer than 255 characters', 'k'.repeat(256)],
    ['empty', ''],
    ['with a character outside printable ASCII', 'tab\there'],
  ])('refuses a key %s with 400', async (_label, bad) => {
    const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const res = await chat(payer, echo('bad key'), bad);
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { type: 'invalid_request', message: expect.stringMatching(/Idempotency-Key must be 1 to 255 printable ASCII/) } });
    expect(upstreamCalls('bad key')).toBe(0);
  });

  it('refuses a key on a streamed chat request with a 400 that says why', async () => {
    const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const res = await chat(payer, { ...echo('streamed'), stream: true }, key());
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/cannot be used with stream: true/);
  });

  it('changes nothing without the header: two identical requests run and are charged twice', async () => {
    const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    for (let i = 0; i < 2; i++) expect((await chat(payer, echo('no key at all'))).status).toBe(200);
    await settled(payer);
    expect(upstreamCalls('no key at all')).toBe(2);
    expect(await usageRows(payer)).toBe(2);
  });

  it('is described in the OpenAPI document on exactly the routes that accept it', async () => {
    const doc = (await (await fetch(`${stack.base}/api/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { parameters?: { name: string; in: string }[]; responses: Record<string, unknown> }>>;
    };
    const withKey = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops)
        .filter(([, op]) => op.parameters?.some((p) => p.in === 'header' && p.name === 'Idempotency-Key'))
        .map(([method, op]) => {
          expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['409', '422']));
          return `${method} ${path}`;
        }),
    );
    expect(withKey.sort()).toEqual(
      [
        'post /api/ai/batches',
        'post /api/ai/chat/completions',
        'post /api/ai/embeddings',
        'post /api/ai/images/edit',
        'post /api/ai/images/edits',
        'post /api/ai/images/generate',
        'post /api/ai/images/generations',
        'post /api/ai/queue',
        'post /api/ai/responses',
        'post /api/ai/videos/generate',
        'post /api/anthropic/v1/messages',
        'post /api/repos/{namespace}/{repo}/fine_tunes',
        'post /api/repos/{namespace}/{repo}/fine_tunes/{id}/tokenize',
        'post /api/repos/{namespace}/{repo}/fine_tunes/{id}/actions/run',
        'post /api/repos/{namespace}/{repo}/fine_tunes/{id}/checkpoints/{step}/deploy',
      ].sort(),
    );
  });
});
