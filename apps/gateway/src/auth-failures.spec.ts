import type { AddressInfo } from 'node:net';
import { createTenant } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';

/**
 * Failed authentication is throttled per client address across API keys, the admin token,
 * trainer tokens and the console's sign-in; the address is the peer's unless TRUST_PROXY names
 * the proxy whose X-Forwarded-For to believe. Real HTTP, so the peer address is real.
 */
describe('failed authentication, throttled per client address', () => {
  const started: GatewayHarness[] = [];
  const listening = async (overrides: Record<string, string>) => {
    const gw = await startGateway({ AUTH_FAILURES_PER_MINUTE: '3', ...overrides });
    started.push(gw);
    await gw.app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(gw.app.getHttpServer().address() as AddressInfo).port}`;
    const call = (path: string, token: string, headers: Record<string, string> = {}, method = 'GET', body?: unknown) =>
      fetch(base + path, { method, headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { 'content-type': 'application/json' }), ...headers }, body: body === undefined ? undefined : JSON.stringify(body) });
    return { gw, base, call };
  };
  afterAll(async () => {
    for (const gw of started) await gw.close();
  });

  it('answers 429 with Retry-After once an address has failed too often, whatever credential it tries next; X-Forwarded-For is not believed by default', async () => {
    const { gw, call, base } = await listening({});
    const valid = await createTenant(gw.http, gw.adminToken, '1');
    const statuses: number[] = [];
    // Wrong API keys, a wrong admin token, a wrong trainer token: one counter, whatever each request claims to come from.
    for (const [i, [path, token]] of ([
      ['/api/credits', 'sk-atelier-wrong-1'],
      ['/api/admin/trainers', 'not-the-admin-token-at-all-0000'],
      ['/api/credits', 'sk-atelier-wrong-2'],
    ] as const).entries())
      statuses.push((await call(path, token, { 'x-forwarded-for': `203.0.113.${i}` })).status);
    expect(statuses).toEqual([401, 401, 401]);
    const refused = await call('/api/credits', 'sk-atelier-wrong-3', { 'x-forwarded-for': '198.51.100.7' });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(/^Too many failed authentication attempts from this address; retry after \d+ s$/);
    // Blocked before any lookup: a good key from the same address waits too, and so do trainers and the console.
    expect((await call('/api/credits', valid.apiKey)).status).toBe(429);
    expect((await call('/api/trainer/lease', 'trn_wrong', {}, 'POST', {})).status).toBe(429);
    expect((await fetch(`${base}/api/console/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ api_key: 'sk-atelier-wrong-4' }) })).status).toBe(429);
    // Unauthenticated routes are not held up.
    expect((await fetch(`${base}/health`)).status).toBe(200);
  });

  it('counts each client behind a trusted proxy on its own (TRUST_PROXY)', async () => {
    const { call } = await listening({ TRUST_PROXY: '127.0.0.1' });
    for (let i = 0; i < 4; i++) expect((await call('/api/credits', 'sk-atelier-wrong', { 'x-forwarded-for': '192.0.2.10' })).status).toBe(i < 3 ? 401 : 429);
    // Another client behind the same proxy is not blocked by the first one's failures.
    expect((await call('/api/credits', 'sk-atelier-wrong', { 'x-forwarded-for': '192.0.2.11' })).status).toBe(401);
  });
});
