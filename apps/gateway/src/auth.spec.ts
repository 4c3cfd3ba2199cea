import http from 'node:http';
import { ApiKeyAuthenticator, NamespaceAccess } from '@atelier/auth';
import { PrismaService } from '@atelier/db';
import { createTenant, waitFor, type Tenant } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';

describe('gateway authentication and namespace access', () => {
  let gw: GatewayHarness;
  let alice: Tenant;
  let bob: Tenant;

  beforeAll(async () => {
    gw = await startGateway();
    alice = await createTenant(gw.http, gw.adminToken);
    bob = await createTenant(gw.http, gw.adminToken);
  });
  afterAll(() => gw?.close());

  /** Counts the database reads of a provider's `lookup` (the API key's, or a namespace grant's) until stopped. */
  const countLookups = (provider: typeof ApiKeyAuthenticator | typeof NamespaceAccess) => {
    const target = gw.app.get(provider) as unknown as { lookup: (...args: unknown[]) => Promise<unknown> };
    const lookup = target.lookup;
    const reads = { count: 0, stop: () => void (target.lookup = lookup) };
    target.lookup = (...args) => {
      reads.count++;
      return lookup.apply(target, args);
    };
    return reads;
  };
  /** Counts the reads of the key table a request makes behind the cache (a private step, wrapped only in these tests). */
  const countKeyReads = () => countLookups(ApiKeyAuthenticator);

  it.each([
    ['no Authorization header', undefined, /Missing Authorization header/],
    ['a non-bearer scheme', 'Basic YWxpY2U6c2VjcmV0', /must be "Bearer <API key>"/],
    ['a malformed key', 'Bearer not-a-key', /Invalid API key/],
    ['an unknown well-formed key', `Bearer atl_abcdefghijkl_${'A'.repeat(43)}`, /Invalid API key/],
  ])('rejects %s with 401 in the error envelope', async (_label, header, message) => {
    const res = await gw.http.request('GET', '/api/ai/models/local-image', {
      headers: header ? { authorization: header } : {},
    });
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({
      error: { type: 'authentication_required', title: expect.any(String), message: expect.stringMatching(message) },
      status: 'error',
      status_message: 'authentication_required',
    });
  });

  it('accepts a valid key', async () => {
    const res = await gw.http.request('GET', '/api/ai/models/local-image', { token: alice.apiKey });
    expect(res.status).toBe(200);
  });

  it('checks every key a kept-alive connection presents, however often it switches between them', async () => {
    // The key a connection presented is remembered with its hash; another on the same connection is checked afresh.
    await gw.app.listen({ port: 0, host: '127.0.0.1' });
    const url = new URL('/api/credits', await gw.app.getUrl());
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const ports = new Set<number>();
    const get = (authorization: string) =>
      new Promise<{ status: number; namespace?: string }>((resolve, reject) => {
        const req = http.get(url, { agent, headers: { authorization } }, (res) => {
          ports.add(res.socket.localPort!);
          let text = '';
          res.setEncoding('utf8').on('data', (d: string) => (text += d));
          res.on('end', () => resolve({ status: res.statusCode!, namespace: (JSON.parse(text) as { namespace?: string }).namespace }));
        });
        req.on('error', reject);
      });
    const forged = `Bearer ${alice.apiKey.slice(0, -1)}${alice.apiKey.endsWith('A') ? 'B' : 'A'}`;
    try {
      for (const [authorization, expected] of [
        [`Bearer ${alice.apiKey}`, { status: 200, namespace: alice.namespace }],
        [`Bearer ${alice.apiKey}`, { status: 200, namespace: alice.namespace }],
        [forged, { status: 401 }],
        [`Bearer ${bob.apiKey}`, { status: 200, namespace: bob.namespace }],
        ['Bearer', { status: 401 }],
        [`Bearer ${alice.apiKey}`, { status: 200, namespace: alice.namespace }],
      ] as const)
        expect({ authorization, ...(await get(authorization)) }).toMatchObject({ authorization, ...expected });
      expect(ports.size).toBe(1);
    } finally {
      agent.destroy();
    }
  });

  it('lets a user read their own namespace and 403s any other', async () => {
    const own = await gw.http.request('GET', `/api/credits?namespace=${alice.namespace}`, { token: alice.apiKey });
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ namespace: alice.namespace, type: 'user', credits: '100', reserved: '0' });

    const foreign = await gw.http.request('GET', `/api/credits?namespace=${bob.namespace}`, { token: alice.apiKey });
    expect(foreign.status).toBe(403);
    expect(foreign.body).toMatchObject({ error: { type: 'permission_denied', message: `You are not a member of namespace '${bob.namespace}'` } });

    // An unknown namespace looks exactly like a foreign one, so tenants cannot be probed.
    const unknown = await gw.http.request('GET', '/api/credits?namespace=no-such-namespace', { token: alice.apiKey });
    expect(unknown.status).toBe(403);
  });

  it('gives org members access to the org namespace and nobody else', async () => {
    const org = `org-${alice.username}`;
    const created = await gw.http.request('POST', '/api/admin/orgs', {
      token: gw.adminToken,
      body: { name: org, members: [alice.username], credits: 50 },
    });
    expect(created.status).toBe(201);
    const member = await gw.http.request('GET', `/api/credits?namespace=${org}`, { token: alice.apiKey });
    expect(member.status).toBe(200);
    expect(member.body).toMatchObject({ namespace: org, type: 'org', credits: '50' });
    const outsider = await gw.http.request('GET', `/api/credits?namespace=${org}`, { token: bob.apiKey });
    expect(outsider.status).toBe(403);
  });

  it('reads an org grant once per second for a member billing to it, and a membership removed in the database stops within a second', async () => {
    const member = await createTenant(gw.http, gw.adminToken, '1');
    const org = `org-${member.username}`;
    expect((await gw.http.request('POST', '/api/admin/orgs', { token: gw.adminToken, body: { name: org, members: [member.username], credits: 50 } })).status).toBe(201);
    const reads = countLookups(NamespaceAccess);
    try {
      // Billed to the org, then a generation of the org read back: one read for all of them (one
      // more for each second the requests took on a slow machine: a grant is trusted that long).
      const started = Date.now();
      const enqueued = await gw.http.request<{ generations: { generation_id: string }[] }>('POST', '/api/ai/queue', {
        token: member.apiKey,
        body: { model: 'local-image', prompt: 'team work', target_namespace: org },
      });
      expect(enqueued.status).toBe(200);
      const id = enqueued.body.generations[0].generation_id;
      const answers = await Promise.all([
        ...Array.from({ length: 10 }, () => gw.http.request('GET', `/api/credits?namespace=${org}`, { token: member.apiKey })),
        ...Array.from({ length: 10 }, () => gw.http.request('GET', `/api/ai/queue/${id}`, { token: member.apiKey })),
      ]);
      expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200));
      expect(reads.count).toBeGreaterThanOrEqual(1);
      expect(reads.count).toBeLessThanOrEqual(1 + Math.floor((Date.now() - started) / 1000));

      await gw.app.get(PrismaService).$executeRaw`DELETE FROM memberships m USING organizations o WHERE m.org_id = o.id AND o.name = ${org}`;
      const removedAt = Date.now();
      await waitFor(async () => (await gw.http.request('GET', `/api/credits?namespace=${org}`, { token: member.apiKey })).status === 403, {
        timeoutMs: 3000,
        intervalMs: 50,
        description: 'the gateway to refuse the org after the membership was removed',
      });
      expect(Date.now() - removedAt).toBeLessThan(1500);
      expect((await gw.http.request('GET', `/api/ai/queue/${id}`, { token: member.apiKey })).status).toBe(404);
    } finally {
      reads.stop();
    }
  });

  it('stops accepting a revoked key on every replica within a second', async () => {
    const replica = await gw.replica();
    const issued = await gw.http.request<{ api_key: string; prefix: string }>('POST', `/api/admin/users/${bob.username}/api_keys`, {
      token: gw.adminToken,
    });
    expect(issued.status).toBe(201);
    const key = issued.body.api_key;
    expect(key.includes(issued.body.prefix)).toBe(true);
    // Both replicas have verified (and cached) the key.
    for (const http of [gw.http, replica.http])
      expect((await http.request('GET', '/api/credits', { token: key })).status).toBe(200);

    const revoked = await gw.http.request('DELETE', `/api/admin/api_keys/${issued.body.prefix}`, { token: gw.adminToken });
    expect(revoked.status).toBe(200);
    const started = Date.now();
    await waitFor(async () => (await replica.http.request('GET', '/api/credits', { token: key })).status === 401, {
      timeoutMs: 1000,
      description: 'the replica to reject the revoked key',
    });
    expect(Date.now() - started).toBeLessThan(1000);
    expect((await gw.http.request('GET', '/api/credits', { token: key })).status).toBe(401);
    // Other keys of the same user keep working.
    expect((await gw.http.request('GET', '/api/credits', { token: bob.apiKey })).status).toBe(200);
  });

  it('verifies a burst of requests with a key not yet cached with one database read', async () => {
    const issued = await gw.http.request<{ api_key: string }>('POST', `/api/admin/users/${alice.username}/api_keys`, { token: gw.adminToken });
    expect(issued.status).toBe(201);
    const reads = countKeyReads();
    try {
      const answers = await Promise.all(Array.from({ length: 50 }, () => gw.http.request('GET', '/api/credits', { token: issued.body.api_key })));
      expect(answers.map((a) => a.status)).toEqual(Array(50).fill(200));
      expect(reads.count).toBe(1);
      // A bad key in the same burst is still refused, each request on its own answer.
      const bad = await Promise.all(Array.from({ length: 5 }, () => gw.http.request('GET', '/api/credits', { token: `${issued.body.api_key.slice(0, -1)}x` })));
      expect(bad.map((a) => a.status)).toEqual(Array(5).fill(401));
    } finally {
      reads.stop();
    }
  });

  it('keeps a key in use verified in the background: a request after a pause needs no read, and a revocation that was never broadcast still holds within a second', async () => {
    const issued = await gw.http.request<{ api_key: string; prefix: string }>('POST', `/api/admin/users/${alice.username}/api_keys`, { token: gw.adminToken });
    expect(issued.status).toBe(201);
    const key = issued.body.api_key;
    expect((await gw.http.request('GET', '/api/credits', { token: key })).status).toBe(200);
    const reads = countKeyReads();
    try {
      // Longer than a reading is trusted (AUTH_CACHE_MS, 1 s): without the background read, the next request reads the key itself.
      await new Promise((r) => setTimeout(r, 2500));
      expect((await gw.http.request('GET', '/api/credits', { token: key })).status).toBe(200);
      expect(reads.count).toBe(0);

      // Revoked behind the gateway's back (no broadcast): the background read finds it.
      await gw.app.get(PrismaService).$executeRaw`UPDATE api_keys SET revoked_at = now() WHERE prefix = ${issued.body.prefix}`;
      const revokedAt = Date.now();
      await waitFor(async () => (await gw.http.request('GET', '/api/credits', { token: key })).status === 401, {
        timeoutMs: 3000,
        intervalMs: 50,
        description: 'the gateway to refuse the key revoked in the database',
      });
      expect(Date.now() - revokedAt).toBeLessThan(1500);
    } finally {
      reads.stop();
    }
  });

  it('serves health without credentials', async () => {
    const res = await gw.http.request('GET', '/health');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'ok', service: 'gateway', checks: { postgres: { status: 'up' }, redis: { status: 'up' } } });
  });
});
