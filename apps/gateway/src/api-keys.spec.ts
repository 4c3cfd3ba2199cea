import type { ApiKeyView } from '@atelier/accounts';
import { PrismaService } from '@atelier/db';
import { createTenant, waitFor, type Tenant } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';

/** The key view the service answers with; `api_key` only when it is made. */
type KeyView = ApiKeyView & { api_key?: string };

/** Self-service API keys: create, list, revoke; scopes; expiry; the namespace a key bills to. */
describe('self-service API keys', () => {
  let gw: GatewayHarness;
  let alice: Tenant;
  let bob: Tenant;

  beforeAll(async () => {
    gw = await startGateway();
    alice = await createTenant(gw.http, gw.adminToken);
    bob = await createTenant(gw.http, gw.adminToken);
  });
  afterAll(() => gw?.close());

  const make = (body: Record<string, unknown>, token = alice.apiKey) => gw.http.request<KeyView>('POST', '/api/api_keys', { token, body });
  const credits = (token: string) => gw.http.request<{ namespace: string }>('GET', '/api/credits', { token });

  it('makes a named key shown once, lists it without the secret, and sees it used', async () => {
    const made = await make({ name: 'ci pipeline' });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({
      api_key: expect.stringMatching(/^atl_/),
      prefix: expect.any(String),
      name: 'ci pipeline',
      namespace: alice.namespace,
      scopes: null,
      expires_at: null,
      limits: null,
      budget: null,
      created_at: expect.stringMatching(/^\d{4}-/),
      last_used_at: null,
    });
    expect((await credits(made.body.api_key!)).body.namespace).toBe(alice.namespace);
    const listed = await waitFor(
      async () => {
        const res = await gw.http.request<{ data: KeyView[] }>('GET', '/api/api_keys', { token: alice.apiKey });
        const mine = res.body.data.find((k) => k.prefix === made.body.prefix);
        return mine?.last_used_at ? res.body.data : undefined;
      },
      { description: 'the key to show it was used' },
    );
    expect(listed.every((k) => !('api_key' in k))).toBe(true);
    expect(listed.find((k) => k.prefix === made.body.prefix)).toMatchObject({ name: 'ci pipeline', last_used_at: expect.stringMatching(/^\d{4}-/) });
    // Bob does not see Alice's keys.
    const bobs = await gw.http.request<{ data: KeyView[] }>('GET', '/api/api_keys', { token: bob.apiKey });
    expect(bobs.body.data.some((k) => k.prefix === made.body.prefix)).toBe(false);
  });

  it('limits a key to its scopes with a 403 that names the missing one', async () => {
    const made = await make({ name: 'models only', scopes: ['models'] });
    expect(made.body.scopes).toEqual(['models']);
    const key = made.body.api_key!;
    expect((await gw.http.request('GET', '/api/ai/models/local-image', { token: key })).status).toBe(200);
    const queue = await gw.http.request('POST', '/api/ai/queue', { token: key, body: { model: 'local-image', prompt: 'x' } });
    expect(queue.status).toBe(403);
    expect(queue.body).toMatchObject({ error: { type: 'permission_denied', message: "This API key lacks the 'queue' scope (it has: models)" } });
    expect((await gw.http.request('GET', '/api/events', { token: key })).status).toBe(403);
    // A limited key cannot mint an unlimited one.
    const mint = await make({ name: 'escalate' }, key);
    expect(mint.status).toBe(403);
    expect(mint.body).toMatchObject({ error: { message: expect.stringMatching(/managing API keys needs a key without scopes/) } });
    // Routes outside every scope (credits) stay open to it.
    expect((await credits(key)).status).toBe(200);
  });

  it('holds each route of a controller to its own scope (images and videos share one)', async () => {
    const key = (await make({ name: 'images only', scopes: ['images'] })).body.api_key!;
    // The image route first, so a rule remembered per controller would then let the video route
    // through. The bodies lack the prompt: past the scope check, validation answers (no media service here).
    const image = await gw.http.request('POST', '/api/ai/images/generate', { token: key, body: { model: 'local-image' } });
    expect(image.status).toBe(400);
    const video = await gw.http.request('POST', '/api/ai/videos/generate', { token: key, body: { model: 'local-video' } });
    expect(video.status).toBe(403);
    expect(video.body).toMatchObject({ error: { type: 'permission_denied', message: "This API key lacks the 'videos' scope (it has: images)" } });
    const videosKey = (await make({ name: 'videos only', scopes: ['videos'] })).body.api_key!;
    expect((await gw.http.request('POST', '/api/ai/images/generate', { token: videosKey, body: { model: 'local-image' } })).status).toBe(403);
  });

  it('refuses a key after it expires, with a 401 that says so', async () => {
    const expires = new Date(Date.now() + 1500);
    const made = await make({ name: 'short lived', expires_at: expires.toISOString() });
    expect(made.body.expires_at).toBe(expires.toISOString());
    const key = made.body.api_key!;
    expect((await credits(key)).status).toBe(200);
    const refused = await waitFor(async () => ((r) => (r.status === 401 ? r : undefined))(await credits(key)), { timeoutMs: 5000, description: 'the key to expire' });
    expect(refused.body).toMatchObject({ error: { type: 'authentication_required', message: expect.stringMatching(/^API key \S+ expired at \d{4}-/) } });
    // Unix seconds work too; the past does not.
    expect((await make({ name: 'unix', expires_at: Math.floor(Date.now() / 1000) + 3600 })).status).toBe(201);
    expect((await make({ name: 'past', expires_at: '2020-01-01T00:00:00Z' })).body).toMatchObject({ error: { detail: { fields: [{ field: 'expires_at', message: 'must be in the future' }] } } });
  });

  it('revokes its own key (every replica within a second) and cannot touch anyone else’s', async () => {
    const replica = await gw.replica();
    const made = await make({ name: 'to revoke' });
    const key = made.body.api_key!;
    for (const http of [gw.http, replica.http]) expect((await http.request('GET', '/api/credits', { token: key })).status).toBe(200);
    expect((await gw.http.request('DELETE', `/api/api_keys/${made.body.prefix}`, { token: bob.apiKey })).status).toBe(404);
    const revoked = await gw.http.request('DELETE', `/api/api_keys/${made.body.prefix}`, { token: alice.apiKey });
    expect(revoked.status).toBe(200);
    await waitFor(async () => (await replica.http.request('GET', '/api/credits', { token: key })).status === 401, { timeoutMs: 1000, description: 'the replica to refuse it' });
    const listed = await gw.http.request<{ data: KeyView[] }>('GET', '/api/api_keys', { token: alice.apiKey });
    expect(listed.body.data.some((k) => k.prefix === made.body.prefix)).toBe(false);
  });

  it('bills a key made for an org to the org by default, and only for members', async () => {
    const org = `org-${alice.username}`;
    await gw.http.request('POST', '/api/admin/orgs', { token: gw.adminToken, body: { name: org, members: [alice.username], credits: 5 } });
    const made = await make({ name: 'team key', namespace: org });
    expect(made.status).toBe(201);
    expect(made.body.namespace).toBe(org);
    expect((await credits(made.body.api_key!)).body).toMatchObject({ namespace: org });
    expect((await make({ name: 'not mine', namespace: org }, bob.apiKey)).status).toBe(403);
    // Its owner may still bill their own namespace, and read back what they put there (a 404 before).
    const own = await gw.http.request<{ generations: { generation_id: string }[] }>('POST', '/api/ai/queue', {
      token: made.body.api_key!,
      body: { model: 'local-image', prompt: 'mine', target_namespace: alice.namespace },
    });
    expect(own.status).toBe(200);
    const read = await gw.http.request('GET', `/api/ai/queue/${own.body.generations[0].generation_id}`, { token: made.body.api_key! });
    expect(read).toMatchObject({ status: 200, body: { target_namespace: alice.namespace } });
  });

  it('refuses a key made for an org whose namespace is gone, with a 401 that says so', async () => {
    const org = `gone-${alice.username}`;
    await gw.http.request('POST', '/api/admin/orgs', { token: gw.adminToken, body: { name: org, members: [alice.username], credits: 5 } });
    const made = await make({ name: 'orphaned', namespace: org });
    expect((await credits(made.body.api_key!)).body).toMatchObject({ namespace: org });
    // No foreign key ties a key to the namespace it bills to: the key outlives it.
    await gw.app.get(PrismaService).$executeRaw`UPDATE api_keys SET namespace_id = gen_random_uuid() WHERE prefix = ${made.body.prefix}`;
    const refused = await waitFor(async () => {
      const res = await credits(made.body.api_key!);
      return res.status === 401 && res;
    });
    expect(refused.body).toMatchObject({ error: { message: 'Invalid API key: its namespace no longer exists' } });
    // The owner's own key is untouched.
    expect((await credits(alice.apiKey)).body).toMatchObject({ namespace: alice.namespace });
  });

  it('makes a key with max_concurrent and a budget, and shows the budget spent this period', async () => {
    const made = await make({ name: 'capped', limits: { max_concurrent: 3 }, budget: { max_spend: '12.50', period: 'month' } });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({ limits: { max_concurrent: 3 }, budget: { max_spend: '12.5', period: 'month', spent: '0' } });
    const listed = await gw.http.request<{ data: KeyView[] }>('GET', '/api/api_keys', { token: alice.apiKey });
    expect(listed.body.data.find((k) => k.prefix === made.body.prefix)).toMatchObject({ budget: { max_spend: '12.5', period: 'month', spent: '0' } });
  });

  it.each([
    ['an unknown scope', { name: 'x', scopes: ['everything'] }, 'scopes'],
    ['no name', {}, 'name'],
    ['a max_concurrent of 0', { name: 'x', limits: { max_concurrent: 0 } }, 'limits.max_concurrent'],
    ['a budget without a period', { name: 'x', budget: { max_spend: '5' } }, 'budget.period'],
    ['a budget of more than 6 decimals', { name: 'x', budget: { max_spend: '0.0000001', period: 'day' } }, 'budget.max_spend'],
    ['a negative budget', { name: 'x', budget: { max_spend: '-1', period: 'month' } }, 'budget.max_spend'],
    ['an unknown field', { name: 'x', colour: 'red' }, 'colour'],
  ])('refuses %s with 400 naming the field', async (_label, body, field) => {
    const res = await make(body);
    expect(res.status).toBe(400);
    expect((res.body as unknown as { error: { detail: { fields: { field: string }[] } } }).error.detail.fields.map((f) => f.field)).toContain(field);
  });
});
