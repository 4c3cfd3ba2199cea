import { EventSource } from 'eventsource';
import { GenerationState } from '@atelier/generations';
import { createTenant, waitFor, type Tenant } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway-test-app';

interface Received {
  type: string;
  data: Record<string, unknown>;
}

/** The official eventsource client with a bearer header, collecting media_generation_completed events. */
function subscribe(base: string, t: Tenant) {
  const events: Received[] = [];
  const es = new EventSource(`${base}/api/events`, {
    fetch: (input, init) => fetch(input, { ...init, headers: { ...init?.headers, authorization: `Bearer ${t.apiKey}` } }),
  });
  es.addEventListener('media_generation_completed', (e) => events.push({ type: e.type, data: JSON.parse(e.data) }));
  const opened = new Promise<void>((resolve, reject) => {
    es.onopen = () => resolve();
    es.onerror = (err) => reject(new Error(`event stream failed: ${err.message}`));
  });
  return { es, events, opened };
}

describe('GET /api/events (Server-Sent Events)', () => {
  let gw: GatewayHarness;
  let base: string;
  let alice: Tenant;
  let bob: Tenant;
  let state: GenerationState;

  const enqueue = async (t: Tenant) =>
    (
      await gw.http.request<{ generations: { generation_id: string }[] }>('POST', '/api/ai/queue', {
        token: t.apiKey,
        body: { model: 'local-image', prompt: 'evented' },
      })
    ).body.generations[0].generation_id;

  beforeAll(async () => {
    gw = await startGateway({ EVENTS_KEEPALIVE_MS: '300' });
    await gw.app.listen({ port: 0, host: '127.0.0.1' });
    base = await gw.app.getUrl();
    alice = await createTenant(gw.http, gw.adminToken);
    bob = await createTenant(gw.http, gw.adminToken);
    state = gw.app.get(GenerationState);
  });
  afterAll(() => gw?.close());

  it('requires a valid key', async () => {
    const res = await fetch(`${base}/api/events`);
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ status: 'error', status_message: 'authentication_required' });
  });

  it('delivers completion events to their owner only, once, with the spec payloads', async () => {
    const a = subscribe(base, alice);
    const b = subscribe(base, bob);
    await Promise.all([a.opened, b.opened]);
    try {
      const ok = await enqueue(alice);
      await state.start(ok);
      await state.succeed(ok, [`${alice.namespace}/outputs/${ok}.png`], '0.01');
      const bad = await enqueue(alice);
      await state.start(bad);
      await state.fail(bad, 'num_inference_steps must be <= 50');
      // A cancelled generation never produces an event, even if the worker finishes after.
      const cancelled = await enqueue(alice);
      await gw.http.request('DELETE', `/api/ai/queue/${cancelled}`, { token: alice.apiKey });
      await state.succeed(cancelled, ['x/y.png'], '0.01');
      // Bob's own event, so we know his stream is live when we check it got nothing of Alice's.
      const bobs = await enqueue(bob);
      await state.start(bobs);
      await state.fail(bobs, 'boom');

      await waitFor(() => a.events.length >= 2 && b.events.length >= 1, { description: 'events to arrive' });
      expect(a.events.map((e) => e.data)).toEqual([
        { generation_id: ok, status: 'succeeded', media_type: 'image', model: 'local-image', url: expect.stringMatching(/\/files\/.*signature=/) },
        { generation_id: bad, status: 'failed', media_type: 'image', model: 'local-image', error: 'num_inference_steps must be <= 50' },
      ]);
      expect(b.events.map((e) => e.data.generation_id)).toEqual([bobs]);
      // The success link really serves the file's bytes once it exists (here it does not: 404, not 403).
      const link = String(a.events[0].data.url).replace(/^https?:\/\/[^/]+/, '');
      expect((await fetch(`${base}${link}`)).status).toBe(404);
    } finally {
      a.es.close();
      b.es.close();
    }
  });

  it('sends ": keep-alive" comments while idle', async () => {
    const res = await fetch(`${base}/api/events`, { headers: { authorization: `Bearer ${alice.apiKey}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reader = res.body!.getReader();
    let text = '';
    const started = Date.now();
    while (!text.includes(': keep-alive\n\n')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    await reader.cancel();
    expect(text).toContain(': keep-alive\n\n');
    // Configured at 300 ms: it arrives on an idle stream, not immediately and not after 15 s.
    expect(Date.now() - started).toBeLessThan(5000);
  });
});
