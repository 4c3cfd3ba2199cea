import { RedisService } from '@atelier/runtime';
import { createTenant, waitFor, type Tenant } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';

/** EVENTS_MAX_STREAMS_PER_KEY counts a key's streams on every replica together, and forgets a dead replica's. */
describe('the event-stream cap across replicas', () => {
  let gw: GatewayHarness;
  const bases: string[] = [];
  let t: Tenant;
  const open = async (base: string) => {
    const c = new AbortController();
    const res = await fetch(`${base}/api/events`, { headers: { authorization: `Bearer ${t.apiKey}` }, signal: c.signal });
    return { status: res.status, body: res.status === 200 ? undefined : ((await res.json()) as { error: { message: string } }), close: () => c.abort() };
  };

  beforeAll(async () => {
    gw = await startGateway({ EVENTS_MAX_STREAMS_PER_KEY: '2' });
    const second = await gw.replica();
    for (const app of [gw.app, second.app]) {
      await app.listen({ port: 0, host: '127.0.0.1' });
      bases.push(await app.getUrl());
    }
    t = await createTenant(gw.http, gw.adminToken);
  });
  afterAll(() => gw?.close());

  it("refuses a key's third stream on either replica when each holds one, and frees the slot when one closes", async () => {
    const [a, b] = bases;
    const first = await open(a);
    const second = await open(b);
    expect([first.status, second.status]).toEqual([200, 200]);
    for (const base of [a, b]) {
      const third = await open(base);
      expect(third.status).toBe(429);
      expect(third.body?.error.message).toBe('Too many open event streams: at most 2 per API key at once (EVENTS_MAX_STREAMS_PER_KEY); close one first');
    }
    first.close();
    const again = await waitFor(
      async () => {
        const s = await open(b);
        return s.status === 200 ? s : undefined;
      },
      { timeoutMs: 5_000, description: 'the slot the closed stream held' },
    );
    second.close();
    again.close();
  });

  it("forgets the streams of a replica whose count was not renewed (it died), and counts a live one's", async () => {
    const redis = gw.app.get(RedisService);
    const keys = (await gw.http.request<{ data: { prefix: string }[] }>('GET', '/api/api_keys', { token: t.apiKey })).body.data;
    const hash = redis.names.key('event-streams', keys[0].prefix);
    await waitFor(async () => !(await redis.client.hget(hash, 'x')) && (await redis.client.hlen(hash)) === 0, { timeoutMs: 5_000, description: 'the earlier streams to be given back' });
    // A replica that died holding 2 streams of this key, its lease run out a minute ago.
    await redis.client.hset(hash, 'dead-replica', `2 ${Date.now() - 60_000}`);
    const s = await open(bases[0]);
    expect(s.status).toBe(200);
    expect(await redis.client.hexists(hash, 'dead-replica')).toBe(0);
    // A live replica holding the other slot: the next one is refused.
    await redis.client.hset(hash, 'live-replica', `1 ${Date.now() + 60_000}`);
    expect((await open(bases[1])).status).toBe(429);
    s.close();
    await redis.client.hdel(hash, 'live-replica');
  });
});
