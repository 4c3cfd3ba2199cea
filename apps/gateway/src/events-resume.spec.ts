import { EventSource } from 'eventsource';
import { PrismaService } from '@atelier/db';
import { EventStreamHub } from '@atelier/events';
import { GenerationState } from '@atelier/queue';
import { RedisService, USER_EVENTS_KEPT, UserEventLog } from '@atelier/runtime';
import { createTenant, waitFor, type Tenant } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';

/** Resumable event streams: every event has an id; a stream that reconnects with Last-Event-ID gets what it missed. */
describe('GET /api/events with Last-Event-ID', () => {
  let gw: GatewayHarness;
  let base: string;
  let state: GenerationState;
  let hub: EventStreamHub;

  beforeAll(async () => {
    gw = await startGateway();
    await gw.app.listen({ port: 0, host: '127.0.0.1' });
    base = await gw.app.getUrl();
    state = gw.app.get(GenerationState);
    hub = gw.app.get(EventStreamHub);
  });
  afterAll(() => gw?.close());

  /** Enqueues and finishes one generation: one media_generation_completed event for its owner. */
  const complete = async (t: Tenant, prompt: string) => {
    const id = (
      await gw.http.request<{ generations: { generation_id: string }[] }>('POST', '/api/ai/queue', { token: t.apiKey, body: { model: 'local-image', prompt } })
    ).body.generations[0].generation_id;
    await state.start(id);
    await state.succeed(id, [`${t.namespace}/outputs/${id}.png`], '0.01');
    return id;
  };

  /** Reads a raw event stream until `until` matches what arrived (or `windowMs` pass). */
  const readRaw = async (t: Tenant, lastEventId: string | undefined, until: (text: string) => boolean, windowMs = 4000) => {
    const controller = new AbortController();
    const res = await fetch(`${base}/api/events`, {
      headers: { authorization: `Bearer ${t.apiKey}`, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
      signal: controller.signal,
    });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const deadline = setTimeout(() => controller.abort(), windowMs);
    try {
      while (!until(text)) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
    } catch {
      // aborted at the deadline: the caller checks what arrived
    } finally {
      clearTimeout(deadline);
      controller.abort();
    }
    return text;
  };

  it('gives every event an id that increases per user', async () => {
    const alice = await createTenant(gw.http, gw.adminToken);
    const ids: string[] = [];
    const es = new EventSource(`${base}/api/events`, {
      fetch: (input, init) => fetch(input, { ...init, headers: { ...init?.headers, authorization: `Bearer ${alice.apiKey}` } }),
    });
    es.addEventListener('media_generation_completed', (e) => ids.push(e.lastEventId));
    await new Promise<void>((resolve) => (es.onopen = () => resolve()));
    try {
      for (const p of ['one', 'two', 'three']) await complete(alice, p);
      await waitFor(() => ids.length === 3, { description: 'three events' });
      expect(ids.every((id) => /^\d+-\d+$/.test(id))).toBe(true);
      const order = ids.map((id) => id.split('-').map(Number));
      for (let i = 1; i < order.length; i++) expect(order[i][0] * 1e6 + order[i][1]).toBeGreaterThan(order[i - 1][0] * 1e6 + order[i - 1][1]);
    } finally {
      es.close();
    }
  });

  it('keeps the stream id of an event the outbox sweeper publishes again: a replay across it shows the event once', async () => {
    const t = await createTenant(gw.http, gw.adminToken);
    await complete(t, 'the marker');
    const marker = /id: (\S+)/.exec(await readRaw(t, '0-0', (text) => /id: \S+/.test(text)))![1];
    const id = await complete(t, 'published twice');
    // As a publisher leaves it that retained and broadcast the event, then died before marking it published.
    await gw.app.get(PrismaService).$executeRaw`UPDATE generation_events SET published_at = NULL, created_at = now() - interval '1 minute' WHERE generation_id = ${id}::uuid`;
    expect(await state.publishStranded(5_000)).toBeGreaterThanOrEqual(1);
    const copies = (text: string) => text.split(`"generation_id":"${id}"`).length - 1;
    // Read for a while (or until a second copy arrives): one copy must come, and only one.
    const replay = await readRaw(t, marker, (text) => copies(text) > 1, 1500);
    expect(copies(replay)).toBe(1);
  });

  it('sends a reconnecting eventsource client what it missed, then live events, each exactly once', async () => {
    const alice = await createTenant(gw.http, gw.adminToken);
    const received: string[] = [];
    const ids: string[] = [];
    const es = new EventSource(`${base}/api/events`, {
      fetch: (input, init) => fetch(input, { ...init, headers: { ...init?.headers, authorization: `Bearer ${alice.apiKey}` } }),
    });
    es.addEventListener('media_generation_completed', (e) => {
      received.push((JSON.parse(e.data) as { generation_id: string }).generation_id);
      ids.push(e.lastEventId);
    });
    await new Promise<void>((resolve) => (es.onopen = () => resolve()));
    try {
      const first = await complete(alice, 'before the drop');
      await waitFor(() => received.length === 1, { description: 'the first event' });

      // The server ends the stream (as on a deploy, with `retry: 1000`); the client reconnects by itself.
      const opens = new Promise<void>((resolve) => (es.onopen = () => resolve()));
      (hub as unknown as { endAll(): void }).endAll();
      await waitFor(() => hub.connections === 0, { description: 'the stream to be closed' });
      const missed = await complete(alice, 'while away');
      // More events race with the reconnection: some arrive live during the replay.
      const racing = Promise.all(['race 1', 'race 2', 'race 3'].map(async (p, i) => {
        await new Promise((r) => setTimeout(r, 900 + i * 60));
        return complete(alice, p);
      }));
      await opens;
      const raced = await racing;
      const after = await complete(alice, 'after the reconnect');

      await waitFor(() => received.length >= 6, { description: 'every event' });
      await new Promise((r) => setTimeout(r, 200)); // room for a duplicate to show up
      expect(new Set(received).size).toBe(received.length);
      expect(new Set(received)).toEqual(new Set([first, missed, ...raced, after]));
      expect(received.slice(0, 2)).toEqual([first, missed]);
      expect(received.at(-1)).toBe(after);
      // Ids increase along the stream, replayed and live alike.
      const keys = ids.map((id) => id.split('-').map(Number)).map(([ms, seq]) => ms * 1e6 + seq);
      expect([...keys].sort((a, b) => a - b)).toEqual(keys);
    } finally {
      es.close();
    }
  });

  it('sends an open stream what was published while its replica was not subscribed, once, however often it catches up', async () => {
    const dave = await createTenant(gw.http, gw.adminToken);
    const owner = (await gw.app.get(PrismaService).user.findUniqueOrThrow({ where: { username: dave.username } })).id;
    const redis = gw.app.get(RedisService);
    const received: string[] = [];
    const es = new EventSource(`${base}/api/events`, {
      fetch: (input, init) => fetch(input, { ...init, headers: { ...init?.headers, authorization: `Bearer ${dave.apiKey}` } }),
    });
    es.addEventListener('media_generation_completed', (e) => received.push((JSON.parse(e.data) as { generation_id: string }).generation_id));
    await new Promise<void>((resolve) => (es.onopen = () => resolve()));
    try {
      await complete(dave, 'live');
      await waitFor(() => received.length === 1, { description: 'the live event' });
      // Retained but never heard: as an event published while this replica's subscriber was away.
      await gw.app.get(UserEventLog).append(owner, { userId: owner, generation_id: 'unheard', status: 'failed', model_name: 'local-image', media_type: 'image', result_key: null, error_message: 'x', completed_at: 0, namespaceId: owner }, 'unheard');
      // The subscriber's connection drops (only ours: it is named after this suite's prefix) and comes back.
      const dropSubscriber = async () => {
        const id = new RegExp(`^id=(\\d+) .*name=${redis.names.prefix}:broadcast-subscriber `, 'm').exec((await redis.client.client('LIST')) as string)?.[1];
        expect(id).toBeDefined();
        await redis.client.client('KILL', 'ID', id!);
      };
      await dropSubscriber();
      await waitFor(() => received.includes('unheard'), { description: 'the unheard event' });
      // A second catch-up (a cluster runs two per node event) sends nothing twice.
      await dropSubscriber();
      await complete(dave, 'after');
      await waitFor(() => received.length >= 3, { description: 'the event after' });
      await new Promise((r) => setTimeout(r, 300)); // room for a duplicate to show up
      expect(received.filter((g) => g === 'unheard')).toHaveLength(1);
      expect(new Set(received).size).toBe(received.length);
    } finally {
      es.close();
    }
  });

  it('replays nothing to a stream opened without Last-Event-ID (the contract default)', async () => {
    const bob = await createTenant(gw.http, gw.adminToken);
    await complete(bob, 'earlier');
    const text = await readRaw(bob, undefined, () => false, 500);
    expect(text).not.toContain('media_generation_completed');
  });

  it('says so in a comment when events after the id are no longer retained, and sends what is', async () => {
    const carol = await createTenant(gw.http, gw.adminToken);
    const log = gw.app.get(UserEventLog);
    const owner = (await gw.app.get(PrismaService).user.findUniqueOrThrow({ where: { username: carol.username } })).id;
    // One more event than the per-user cap: the oldest is trimmed.
    const ids: string[] = [];
    for (let i = 0; i <= USER_EVENTS_KEPT; i++) ids.push(await log.append(owner, { userId: owner, generation_id: `g${i}`, status: 'failed', model_name: 'local-image', media_type: 'image', result_key: null, error_message: 'x', completed_at: 0, namespaceId: owner }, `g${i}`));
    const text = await readRaw(carol, '0-1', (t) => t.includes(`"generation_id":"g${USER_EVENTS_KEPT}"`));
    expect(text).toMatch(/^: some events after 0-1 are no longer retained/m);
    expect(text).not.toContain('"generation_id":"g0"');
    expect(text).toMatch(new RegExp(`event: media_generation_completed\ndata: \\{"generation_id":"g1"[^\n]*\nid: ${ids[1]}\n\n`));
    expect(text.match(/event: media_generation_completed/g)).toHaveLength(USER_EVENTS_KEPT);
    // Resuming from a retained id says nothing is missing and sends only what follows it.
    const tail = await readRaw(carol, ids[USER_EVENTS_KEPT - 1], (t) => t.includes(`"generation_id":"g${USER_EVENTS_KEPT}"`));
    expect(tail).not.toMatch(/no longer retained/);
    expect(tail.match(/event: media_generation_completed/g)).toHaveLength(1);
  });
});
