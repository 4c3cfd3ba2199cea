import { uniqueName } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';

describe('operator (admin) API', () => {
  let gw: GatewayHarness;
  const admin = (method: 'GET' | 'POST' | 'DELETE', url: string, body?: unknown) =>
    gw.http.request(method, url, { token: gw.adminToken, body });

  beforeAll(async () => {
    gw = await startGateway();
  });
  afterAll(() => gw?.close());

  it('creates a user with a namespace, credits and a working first key', async () => {
    const username = uniqueName();
    const res = await admin('POST', '/api/admin/users', { username, credits: '12.5' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ username, namespace: username, api_key: expect.stringMatching(/^atl_[a-z0-9]{12}_/) });
    const ns = await admin('GET', `/api/admin/namespaces/${username}`);
    expect(ns.body).toEqual({ namespace: username, type: 'user', credits: '12.5', reserved: '0' });
    const me = await gw.http.request('GET', '/api/credits', { token: res.body.api_key as string });
    expect(me.status).toBe(200);
  });

  it('refuses duplicates with 409, also across users and orgs', async () => {
    const username = uniqueName();
    expect((await admin('POST', '/api/admin/users', { username })).status).toBe(201);
    const again = await admin('POST', '/api/admin/users', { username });
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ error: { type: 'conflict', message: `Namespace '${username}' already exists` } });
    const org = await admin('POST', '/api/admin/orgs', { name: username, members: [] });
    expect(org.status).toBe(409);
  });

  it('issues and revokes extra keys; unknown users and prefixes are 404', async () => {
    const username = uniqueName();
    await admin('POST', '/api/admin/users', { username });
    const key = await admin('POST', `/api/admin/users/${username}/api_keys`);
    expect(key.status).toBe(201);
    expect(key.body).toMatchObject({ api_key: expect.any(String), prefix: expect.stringMatching(/^[a-z0-9]{12}$/), name: null, namespace: username, budget: null });
    // The operator sets the same fields users can, validated the same way.
    const shaped = await admin('POST', `/api/admin/users/${username}/api_keys`, {
      name: 'batch job',
      scopes: ['chat'],
      limits: { rpm: 10, max_concurrent: 2 },
      budget: { max_spend: '3', period: 'day' },
    });
    expect(shaped.status).toBe(201);
    expect(shaped.body).toMatchObject({ name: 'batch job', scopes: ['chat'], limits: { rpm: 10, max_concurrent: 2 }, budget: { max_spend: '3', period: 'day', spent: '0' } });
    expect((await admin('POST', `/api/admin/users/${username}/api_keys`, { budget: { max_spend: 'lots', period: 'day' } })).status).toBe(400);
    expect((await admin('POST', '/api/admin/users/nobody-here/api_keys')).status).toBe(404);
    expect((await admin('DELETE', `/api/admin/api_keys/${key.body.prefix}`)).status).toBe(200);
    expect((await gw.http.request('GET', '/api/credits', { token: key.body.api_key as string })).status).toBe(401);
    expect((await admin('DELETE', '/api/admin/api_keys/zzzzzzzzzzzz')).status).toBe(404);
  });

  it('creates orgs with members and rejects unknown members', async () => {
    const a = uniqueName();
    await admin('POST', '/api/admin/users', { username: a });
    const name = uniqueName('org');
    const res = await admin('POST', '/api/admin/orgs', { name, members: [a], credits: 7 });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ name, namespace: name, members: [a], credits: '7' });
    const bad = await admin('POST', '/api/admin/orgs', { name: uniqueName('org'), members: [a, 'ghost-user'] });
    expect(bad.status).toBe(404);
    expect(bad.body).toMatchObject({ error: { message: 'Unknown user(s): ghost-user' } });
    const ns = await admin('GET', `/api/admin/namespaces/${name}`);
    expect(ns.body).toMatchObject({ type: 'org', credits: '7' });
  });

  it('adjusts credits exactly, up and down, never below zero', async () => {
    const username = uniqueName();
    await admin('POST', '/api/admin/users', { username, credits: '1' });
    const up = await admin('POST', `/api/admin/namespaces/${username}/credits`, { amount: '0.1' });
    expect(up.status).toBe(200);
    expect(up.body).toEqual({ namespace: username, credits: '1.1' });
    const up2 = await admin('POST', `/api/admin/namespaces/${username}/credits`, { amount: 0.2 });
    expect(up2.body).toEqual({ namespace: username, credits: '1.3' }); // exact decimals: no 1.3000000000000003
    const down = await admin('POST', `/api/admin/namespaces/${username}/credits`, { amount: -1.3 });
    expect(down.body).toEqual({ namespace: username, credits: '0' });
    const tooMuch = await admin('POST', `/api/admin/namespaces/${username}/credits`, { amount: -1 });
    expect(tooMuch.status).toBe(400);
    expect((await admin('POST', `/api/admin/namespaces/${username}/credits`, { amount: 'lots' })).status).toBe(400);
    expect((await admin('POST', `/api/admin/namespaces/${username}/credits`, { amount: 0 })).status).toBe(400);
    expect((await admin('POST', '/api/admin/namespaces/nowhere-ns/credits', { amount: 1 })).status).toBe(404);
    expect((await admin('GET', '/api/admin/namespaces/nowhere-ns')).status).toBe(404);
  });

  it('requires the admin token', async () => {
    expect((await gw.http.request('POST', '/api/admin/users', { body: { username: uniqueName() } })).status).toBe(401);
    const wrong = await gw.http.request('POST', '/api/admin/users', { token: 'x'.repeat(40), body: { username: uniqueName() } });
    expect(wrong.status).toBe(401);
    // A user's API key is not an admin credential.
    const username = uniqueName();
    const created = await admin('POST', '/api/admin/users', { username });
    const asUser = await gw.http.request('GET', `/api/admin/namespaces/${username}`, { token: created.body.api_key as string });
    expect(asUser.status).toBe(401);
  });
});

describe('operator API without ADMIN_TOKEN', () => {
  let gw: GatewayHarness;
  beforeAll(async () => {
    gw = await startGateway({ ADMIN_TOKEN: '' });
  });
  afterAll(() => gw?.close());

  it('does not exist', async () => {
    const res = await gw.http.request('POST', '/api/admin/users', { token: 'anything-at-all-123', body: { username: 'x' } });
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ status: 'error', status_message: 'route_not_found' });
  });
});
