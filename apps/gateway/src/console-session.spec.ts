import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { createTenant, type Tenant, type TestResponse } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';

const ORIGIN = 'http://localhost';

/** The session cookie a sign-in set, as the browser would send it back. */
function cookieOf(res: TestResponse<unknown>): string {
  const header = String(res.headers['set-cookie'] ?? '');
  const m = /^(atelier_session=[^;]+)/.exec(header);
  if (!m) throw new Error(`no session cookie in ${header}`);
  return m[1];
}

/** Console sign-in: an HttpOnly cookie for a key, standing in for it on the API, and what it must not do. */
describe('console sessions', () => {
  let gw: GatewayHarness;
  let alice: Tenant;
  let redis: Redis;
  let consoleDir: string;

  beforeAll(async () => {
    consoleDir = mkdtempSync(path.join(os.tmpdir(), 'atelier-console-'));
    mkdirSync(path.join(consoleDir, 'assets'));
    writeFileSync(path.join(consoleDir, 'index.html'), '<!doctype html><script type="module" src="/console/assets/app-1a2b.js"></script>');
    writeFileSync(path.join(consoleDir, 'assets/app-1a2b.js'), 'console.log(1)');
    gw = await startGateway({ CONSOLE_DIR: consoleDir });
    alice = await createTenant(gw.http, gw.adminToken);
    redis = new Redis(gw.env.redisUrl);
  });
  afterAll(async () => {
    redis?.disconnect();
    await gw?.close();
    rmSync(consoleDir, { recursive: true, force: true });
  });

  const signIn = (body: Record<string, unknown>, headers: Record<string, string> = {}) => gw.http.request('POST', '/api/console/session', { body, headers });
  const withCookie = (cookie: string, extra: Record<string, string> = {}) => ({ cookie, ...extra });
  const sessionKey = (cookie: string) => `${gw.env.prefix}:console-session:${createHash('sha256').update(cookie.split('=')[1]).digest('base64url')}`;

  it('trades a key for an HttpOnly, SameSite=Lax session cookie that never carries the key', async () => {
    const res = await signIn({ api_key: alice.apiKey }, { origin: ORIGIN, host: 'localhost:80' });
    expect(res.status).toBe(201);
    const header = String(res.headers['set-cookie']);
    expect(header).toMatch(/^atelier_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=43200$/);
    expect(header).not.toContain(alice.apiKey);
    expect(res.text).not.toContain(alice.apiKey);
    expect(res.body).toMatchObject({ username: alice.username, namespace: alice.namespace, scopes: [], operator: false });
    // Redis holds the key's hash, never the key.
    const stored = await redis.get(sessionKey(cookieOf(res)));
    expect(stored).not.toContain(alice.apiKey);
    expect(JSON.parse(stored!).key.hash).toBe(createHash('sha256').update(alice.apiKey).digest('hex'));
  });

  it('authenticates the API as the key would, and says who the session is', async () => {
    const cookie = cookieOf(await signIn({ api_key: alice.apiKey }));
    const credits = await gw.http.request<{ namespace: string }>('GET', '/api/credits', { headers: withCookie(cookie) });
    expect(credits.status).toBe(200);
    expect(credits.body.namespace).toBe(alice.namespace);
    const me = await gw.http.request('GET', '/api/console/session', { headers: withCookie(cookie) });
    expect(me.body).toMatchObject({ username: alice.username, key_prefix: expect.any(String), operator: false });
    // An Authorization header always wins: an API client with a stray cookie is itself.
    const bob = await createTenant(gw.http, gw.adminToken);
    const asBob = await gw.http.request<{ namespace: string }>('GET', '/api/credits', { token: bob.apiKey, headers: withCookie(cookie) });
    expect(asBob.body.namespace).toBe(bob.namespace);
  });

  it('refuses an unknown key, a wrong admin token and an empty sign-in with no cookie', async () => {
    for (const [body, status] of [
      [{ api_key: 'atl_notakey' }, 401],
      [{ api_key: `${alice.apiKey}x` }, 401],
      [{ admin_token: 'wrong-token-of-some-length' }, 401],
      [{}, 400],
      [{ api_key: 42 }, 400],
    ] as const) {
      const res = await signIn(body);
      expect({ body, status: res.status, cookie: res.headers['set-cookie'] }).toEqual({ body, status, cookie: undefined });
      expect(res.body).toMatchObject({ status: 'error' });
    }
    expect((await gw.http.request('GET', '/api/credits', { headers: { cookie: 'atelier_session=forged' } })).status).toBe(401);
  });

  it('refuses a cookie-authenticated unsafe request from another origin (CSRF), and only that', async () => {
    const cookie = cookieOf(await signIn({ api_key: alice.apiKey }));
    const enqueue = (headers: Record<string, string>) =>
      gw.http.request('POST', '/api/ai/queue', { headers: withCookie(cookie, headers), body: { model: 'local-image', prompt: 'a boat', width: 64, height: 64 } });
    const foreign = await enqueue({ origin: 'http://evil.example', host: 'localhost:80' });
    expect(foreign.status).toBe(403);
    expect(foreign.body).toMatchObject({ error: { type: 'permission_denied', message: expect.stringContaining('Cross-origin') } });
    expect((await enqueue({ host: 'localhost:80' })).status).toBe(403);
    expect((await enqueue({ origin: 'null', host: 'localhost:80' })).status).toBe(403);
    expect((await enqueue({ origin: ORIGIN, host: 'localhost:80' })).status).toBe(200);
    expect((await enqueue({ 'sec-fetch-site': 'same-origin', host: 'localhost:80' })).status).toBe(200);
    // Reads stay open to the session (a GET changes nothing), and a bearer key is never checked for Origin.
    expect((await gw.http.request('GET', '/api/credits', { headers: withCookie(cookie, { origin: 'http://evil.example' }) })).status).toBe(200);
    const bearer = await gw.http.request('POST', '/api/ai/queue', {
      token: alice.apiKey,
      headers: { origin: 'http://evil.example' },
      body: { model: 'local-image', prompt: 'a boat', width: 64, height: 64 },
    });
    expect(bearer.status).toBe(200);
    // Nor may a foreign page sign a visitor in.
    expect((await signIn({ api_key: alice.apiKey }, { origin: 'http://evil.example', host: 'localhost:80' })).status).toBe(403);
  });

  it("keeps a scoped key's scopes, and operator routes to sessions opened with the admin token", async () => {
    const scoped = await gw.http.request<{ api_key: string }>('POST', '/api/api_keys', { token: alice.apiKey, body: { name: 'chat only', scopes: ['chat'] } });
    const cookie = cookieOf(await signIn({ api_key: scoped.body.api_key }));
    expect((await gw.http.request('GET', '/api/console/session', { headers: withCookie(cookie) })).body).toMatchObject({ scopes: ['chat'] });
    expect((await gw.http.request('GET', '/api/api_keys', { headers: withCookie(cookie) })).status).toBe(403);
    expect((await gw.http.request('GET', '/api/ai/queue', { headers: withCookie(cookie) })).status).toBe(403);
    expect((await gw.http.request('GET', `/api/admin/namespaces/${alice.namespace}`, { headers: withCookie(cookie) })).status).toBe(403);

    const operator = cookieOf(await signIn({ api_key: alice.apiKey, admin_token: gw.adminToken }));
    expect((await gw.http.request('GET', '/api/console/session', { headers: withCookie(operator) })).body).toMatchObject({ operator: true, username: alice.username });
    expect((await gw.http.request('GET', `/api/admin/namespaces/${alice.namespace}`, { headers: withCookie(operator) })).status).toBe(200);
    const adminOnly = cookieOf(await signIn({ admin_token: gw.adminToken }));
    expect((await gw.http.request('GET', '/api/admin/trainers', { headers: withCookie(adminOnly) })).status).toBe(200);
    const noKey = await gw.http.request('GET', '/api/credits', { headers: withCookie(adminOnly) });
    expect(noKey.status).toBe(401);
    expect(noKey.body).toMatchObject({ error: { message: expect.stringContaining('admin token only') } });
  });

  it('ends every session of a key when the key is revoked', async () => {
    const made = await gw.http.request<{ api_key: string; prefix: string }>('POST', '/api/api_keys', { token: alice.apiKey, body: { name: 'to revoke' } });
    const cookie = cookieOf(await signIn({ api_key: made.body.api_key }));
    expect((await gw.http.request('GET', '/api/credits', { headers: withCookie(cookie) })).status).toBe(200);
    expect((await gw.http.request('DELETE', `/api/api_keys/${made.body.prefix}`, { token: alice.apiKey })).status).toBe(200);
    expect((await gw.http.request('GET', '/api/credits', { headers: withCookie(cookie) })).status).toBe(401);
    expect(await redis.exists(sessionKey(cookie))).toBe(0);
    expect((await signIn({ api_key: made.body.api_key })).status).toBe(401);
  });

  it('signs out server-side, and ends a session idle too long or past its absolute expiry', async () => {
    const cookie = cookieOf(await signIn({ api_key: alice.apiKey }));
    const out = await gw.http.request('DELETE', '/api/console/session', { headers: withCookie(cookie, { origin: ORIGIN, host: 'localhost:80' }) });
    expect(out.status).toBe(204);
    expect(String(out.headers['set-cookie'])).toMatch(/^atelier_session=; .*Max-Age=0/);
    expect((await gw.http.request('GET', '/api/credits', { headers: withCookie(cookie) })).status).toBe(401);

    // Idle: the session's Redis entry expires (its TTL is the idle time, renewed by use).
    const idle = cookieOf(await signIn({ api_key: alice.apiKey }));
    expect(await redis.pttl(sessionKey(idle))).toBeGreaterThan(119 * 60_000);
    await redis.pexpire(sessionKey(idle), 1);
    await new Promise((r) => setTimeout(r, 10));
    expect((await gw.http.request('GET', '/api/credits', { headers: withCookie(idle) })).status).toBe(401);

    // Absolute: however active, a session signed in 12 hours ago is over.
    const old = cookieOf(await signIn({ api_key: alice.apiKey }));
    const stored = JSON.parse((await redis.get(sessionKey(old)))!);
    await redis.set(sessionKey(old), JSON.stringify({ ...stored, createdAt: Date.now() - 12 * 3_600_000 - 1 }), 'KEEPTTL');
    const res = await gw.http.request('GET', '/api/credits', { headers: withCookie(old) });
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ error: { message: expect.stringContaining('session has ended') } });
    expect(await redis.exists(sessionKey(old))).toBe(0);
  });

  it('serves the console under /console with a strict CSP, every page path as the app, assets cached by hash', async () => {
    for (const url of ['/console', '/console/', '/console/keys', '/console/generations/abc']) {
      const page = await gw.http.request('GET', url);
      expect({ url, status: page.status }).toEqual({ url, status: 200 });
      expect(page.text).toContain('<script type="module"');
      expect(page.headers['content-security-policy']).toMatch(/default-src 'none'; script-src 'self'; style-src 'self'/);
      expect(page.headers['content-security-policy']).toContain("frame-ancestors 'none'");
      expect(page.headers).toMatchObject({ 'x-content-type-options': 'nosniff', 'x-frame-options': 'DENY', 'cache-control': 'no-cache', 'referrer-policy': 'same-origin' });
    }
    const asset = await gw.http.request('GET', '/console/assets/app-1a2b.js');
    expect(asset.headers).toMatchObject({ 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'public, max-age=31536000, immutable' });
    const missing = await gw.http.request('GET', '/console/assets/gone.js');
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ status: 'error' });
  });
});

describe('console sessions behind https', () => {
  let gw: GatewayHarness;
  beforeAll(async () => {
    gw = await startGateway({ PUBLIC_URL: 'https://atelier.example.com' });
  });
  afterAll(() => gw?.close());

  it('marks the cookie Secure and accepts requests from the public origin', async () => {
    const tenant = await createTenant(gw.http, gw.adminToken);
    const res = await gw.http.request('POST', '/api/console/session', { body: { api_key: tenant.apiKey }, headers: { origin: 'https://atelier.example.com', host: '10.0.0.7:8080' } });
    expect(res.status).toBe(201);
    expect(String(res.headers['set-cookie'])).toMatch(/; Secure$/);
  });
});
