import { createTenant, type Tenant, type TestHttp } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';

type Limits = { rpm?: number | null; read_rpm?: number | null; tpm?: number | null; max_concurrent?: number | null };

/**
 * Requests per minute by class, per key and per namespace, enforced across gateway replicas
 * through Redis: `rpm` for requests that create work or charge, `read_rpm` for every other one,
 * so polling a result never spends the budget that caps work.
 */
describe('rate limits by class (rpm, read_rpm)', () => {
  let gw: GatewayHarness;
  let replica: Awaited<ReturnType<GatewayHarness['replica']>>;

  beforeAll(async () => {
    gw = await startGateway();
    replica = await gw.replica();
  });
  afterAll(() => gw?.close());

  const setLimits = (t: Tenant, limits: Limits) => gw.http.request('PUT', `/api/admin/namespaces/${t.namespace}/limits`, { token: gw.adminToken, body: limits });
  /** Work: an enqueue (no worker runs here, so it stays queued and costs nothing more). */
  const enqueue = (token: string, via: TestHttp = gw.http) =>
    via.request<{ generations: { generation_id: string }[] }>('POST', '/api/ai/queue', { token, body: { model: 'local-image', prompt: 'a lighthouse' } });

  it('admits 30 of 100 concurrent reads against a namespace read_rpm of 30, across two gateways, and tells the rest when to retry', async () => {
    const t = await createTenant(gw.http, gw.adminToken);
    expect((await setLimits(t, { read_rpm: 30 })).body).toEqual({ namespace: t.namespace, limits: { rpm: null, read_rpm: 30, tpm: null, max_concurrent: null, queue_weight: 1, capture_rate: 0 } });
    const answers = await Promise.all(Array.from({ length: 100 }, (_, i) => (i % 2 ? replica.http : gw.http).request('GET', '/api/credits', { token: t.apiKey })));
    const ok = answers.filter((a) => a.status === 200);
    const limited = answers.filter((a) => a.status === 429);
    expect(ok.length).toBeGreaterThanOrEqual(29);
    expect(ok.length).toBeLessThanOrEqual(31);
    expect(ok.length + limited.length).toBe(100);
    expect(limited[0].body).toMatchObject({
      error: { type: 'rate_limited', message: expect.stringMatching(new RegExp(`^Rate limit reached: 30 read requests \\(read_rpm\\) per minute for namespace ${t.namespace}; retry after [12] s$`)) },
    });
    for (const a of limited) {
      expect(Number(a.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(a.headers['x-ratelimit-remaining-requests']).toBe('0');
    }
    // OpenAI's headers on every answer: the limit, what is left (down to 0), when it is full again.
    expect(new Set(ok.map((a) => a.headers['x-ratelimit-limit-requests']))).toEqual(new Set(['30']));
    expect(ok.map((a) => Number(a.headers['x-ratelimit-remaining-requests'])).sort((a, b) => a - b)[0]).toBeLessThanOrEqual(1);
    expect(ok[0].headers['x-ratelimit-reset-requests']).toMatch(/^\d+s$/);
    // Reads spent, work is still free.
    expect((await enqueue(t.apiKey)).status).toBe(200);
  });

  it('never spends rpm on a poll: a namespace of rpm 3 polls its generation, its credits and a model as often as it likes', async () => {
    const t = await createTenant(gw.http, gw.adminToken);
    await setLimits(t, { rpm: 3 });
    const work: number[] = [];
    let id = '';
    for (let i = 0; i < 3; i++) {
      const res = await enqueue(t.apiKey, i % 2 ? replica.http : gw.http);
      work.push(res.status);
      id ||= res.body.generations[0].generation_id;
      expect(res.headers['x-ratelimit-limit-requests']).toBe('3');
    }
    for (let i = 0; i < 10; i++)
      for (const url of [`/api/ai/queue/${id}`, '/api/credits', '/api/ai/models/local-image', '/api/ai/queue']) {
        const res = await (i % 2 ? replica.http : gw.http).request('GET', url, { token: t.apiKey });
        expect({ url, status: res.status }).toEqual({ url, status: 200 });
        // No read limit: a read answers without the rpm headers, which describe work.
        expect(res.headers['x-ratelimit-limit-requests']).toBeUndefined();
      }
    const fourth = await enqueue(t.apiKey, replica.http);
    work.push(fourth.status);
    expect(work).toEqual([200, 200, 200, 429]);
    expect(fourth.body).toMatchObject({ error: { message: expect.stringMatching(new RegExp(`^Rate limit reached: 3 requests per minute for namespace ${t.namespace}`)) } });
  });

  it('limits reads with read_rpm and work with rpm, each answer describing its own class in the x-ratelimit headers', async () => {
    const t = await createTenant(gw.http, gw.adminToken);
    await setLimits(t, { rpm: 50, read_rpm: 2 });
    const reads = [];
    for (let i = 0; i < 3; i++) reads.push(await gw.http.request('GET', '/api/credits', { token: t.apiKey }));
    expect(reads.map((r) => r.status)).toEqual([200, 200, 429]);
    expect(reads[0].headers['x-ratelimit-limit-requests']).toBe('2');
    const made = await enqueue(t.apiKey);
    expect(made.status).toBe(200);
    expect(made.headers['x-ratelimit-limit-requests']).toBe('50');
    expect(made.headers['x-ratelimit-remaining-requests']).toBe('49');
  });

  it('applies a changed limit to the very next request on every replica', async () => {
    const t = await createTenant(gw.http, gw.adminToken);
    // Both replicas have the key cached, with no limits.
    for (const via of [gw.http, replica.http]) expect((await via.request('GET', '/api/credits', { token: t.apiKey })).status).toBe(200);
    expect((await setLimits(t, { rpm: 3 })).status).toBe(200);
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await enqueue(t.apiKey, replica.http)).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
    // And lifting it, at once too.
    expect((await setLimits(t, { rpm: null })).status).toBe(200);
    expect((await enqueue(t.apiKey, replica.http)).status).toBe(200);
  });

  it("enforces a key's own limits, which may not exceed its namespace's; managing keys spends neither class", async () => {
    const t = await createTenant(gw.http, gw.adminToken);
    const made = await gw.http.request<{ api_key: string; prefix: string; limits: unknown }>('POST', '/api/api_keys', {
      token: t.apiKey,
      body: { name: 'slow', limits: { rpm: 1, read_rpm: 5 } },
    });
    expect(made.status).toBe(201);
    expect(made.body.limits).toEqual({ rpm: 1, read_rpm: 5 });
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) statuses.push((await gw.http.request('GET', '/api/credits', { token: made.body.api_key })).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
    const refused = await gw.http.request('GET', '/api/credits', { token: made.body.api_key });
    expect(refused.body).toMatchObject({ error: { message: expect.stringContaining(`5 read requests (read_rpm) per minute for API key ${made.body.prefix}`) } });
    // Its reads are spent, its one work request of the minute is not.
    expect((await enqueue(made.body.api_key)).status).toBe(200);
    expect((await enqueue(made.body.api_key)).status).toBe(429);
    // The owner's other keys are not affected.
    expect((await gw.http.request('GET', '/api/credits', { token: t.apiKey })).status).toBe(200);

    // A key that has spent both classes still manages keys: list, make, revoke.
    expect((await gw.http.request('GET', '/api/api_keys', { token: made.body.api_key })).status).toBe(200);
    const child = await gw.http.request<{ prefix: string }>('POST', '/api/api_keys', { token: made.body.api_key, body: { name: 'child' } });
    expect(child.status).toBe(201);
    expect((await gw.http.request('DELETE', `/api/api_keys/${child.body.prefix}`, { token: made.body.api_key })).status).toBe(200);

    await setLimits(t, { rpm: 10, read_rpm: 20 });
    for (const [field, cap] of [
      ['rpm', 10],
      ['read_rpm', 20],
    ] as const) {
      const over = await gw.http.request('POST', '/api/api_keys', { token: t.apiKey, body: { name: 'too fast', limits: { [field]: cap * 2 } } });
      expect(over.status).toBe(400);
      expect(over.body).toMatchObject({ error: { message: `limits.${field} must not exceed the namespace's own limit of ${cap}` } });
    }
  });
});
