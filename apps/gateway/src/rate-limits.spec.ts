import { createTenant, type Tenant } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';

/** Requests per minute per key and per namespace, enforced across gateway replicas through Redis. */
describe('rate limits (rpm)', () => {
  let gw: GatewayHarness;
  let replica: Awaited<ReturnType<GatewayHarness['replica']>>;

  beforeAll(async () => {
    gw = await startGateway();
    replica = await gw.replica();
  });
  afterAll(() => gw?.close());

  const setLimit = (t: Tenant, rpm: number | null) => gw.http.request('PUT', `/api/admin/namespaces/${t.namespace}/limits`, { token: gw.adminToken, body: { rpm } });

  it('admits 30 of 100 concurrent requests against a namespace limit of 30 rpm, across two gateways, and tells the rest when to retry', async () => {
    const t = await createTenant(gw.http, gw.adminToken);
    expect((await setLimit(t, 30)).body).toEqual({ namespace: t.namespace, limits: { rpm: 30, tpm: null, max_concurrent: null } });
    const answers = await Promise.all(Array.from({ length: 100 }, (_, i) => (i % 2 ? replica.http : gw.http).request('GET', '/api/credits', { token: t.apiKey })));
    const ok = answers.filter((a) => a.status === 200);
    const limited = answers.filter((a) => a.status === 429);
    expect(ok.length).toBeGreaterThanOrEqual(29);
    expect(ok.length).toBeLessThanOrEqual(31);
    expect(ok.length + limited.length).toBe(100);
    expect(limited[0].body).toMatchObject({ error: { type: 'rate_limited', message: expect.stringMatching(new RegExp(`^Rate limit reached: 30 requests per minute for namespace ${t.namespace}; retry after [12] s$`)) } });
    for (const a of limited) {
      expect(Number(a.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(a.headers['x-ratelimit-remaining-requests']).toBe('0');
    }
    // OpenAI's headers on every answer: the limit, what is left (down to 0), when it is full again.
    expect(new Set(ok.map((a) => a.headers['x-ratelimit-limit-requests']))).toEqual(new Set(['30']));
    expect(ok.map((a) => Number(a.headers['x-ratelimit-remaining-requests'])).sort((a, b) => a - b)[0]).toBeLessThanOrEqual(1);
    expect(ok[0].headers['x-ratelimit-reset-requests']).toMatch(/^\d+s$/);
    // Lifting the limit lets the namespace through again (after the auth cache, at most a second).
    await setLimit(t, null);
  });

  it("enforces a key's own limit, which may not exceed its namespace's", async () => {
    const t = await createTenant(gw.http, gw.adminToken);
    const made = await gw.http.request<{ api_key: string; prefix: string; limits: unknown }>('POST', '/api/api_keys', { token: t.apiKey, body: { name: 'slow', limits: { rpm: 5 } } });
    expect(made.status).toBe(201);
    expect(made.body.limits).toEqual({ rpm: 5 });
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) statuses.push((await gw.http.request('GET', '/api/credits', { token: made.body.api_key })).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
    const refused = await gw.http.request('GET', '/api/credits', { token: made.body.api_key });
    expect(refused.body).toMatchObject({ error: { message: expect.stringContaining(`5 requests per minute for API key ${made.body.prefix}`) } });
    // The owner's other keys are not affected.
    expect((await gw.http.request('GET', '/api/credits', { token: t.apiKey })).status).toBe(200);

    await setLimit(t, 10);
    const over = await gw.http.request('POST', '/api/api_keys', { token: t.apiKey, body: { name: 'too fast', limits: { rpm: 20 } } });
    expect(over.status).toBe(400);
    expect(over.body).toMatchObject({ error: { message: "limits.rpm must not exceed the namespace's own limit of 10" } });
  });
});
