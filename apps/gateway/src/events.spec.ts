import { EventSource } from 'eventsource';
import { GenerationState } from '@atelier/queue';
import { createTenant, waitFor, type Tenant } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';

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

/** Short enough for a test; the bound checked is the contract's (15 s +- 1 s) scaled down. */
const KEEPALIVE_MS = 1000;

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
    gw = await startGateway({ EVENTS_KEEPALIVE_MS: String(KEEPALIVE_MS) });
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

  it('sends ": keep-alive" exactly one interval after the last write, also after an event', async () => {
    const res = await fetch(`${base}/api/events`, { headers: { authorization: `Bearer ${alice.apiKey}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reader = res.body!.getReader();
    // Arrival time of every frame; the headers' arrival is the stream's first write.
    const frames: { at: number; text: string }[] = [{ at: Date.now(), text: '(open)' }];
    let pending = '';
    const readFrames = async (until: () => boolean) => {
      while (!until()) {
        const { value, done } = await reader.read();
        if (done) throw new Error('stream ended');
        pending += new TextDecoder().decode(value);
        let end: number;
        while ((end = pending.indexOf('\n\n')) >= 0) {
          frames.push({ at: Date.now(), text: pending.slice(0, end) });
          pending = pending.slice(end + 2);
        }
      }
    };
    try {
      await readFrames(() => frames.length >= 3);
      // An event resets the clock: the next keep-alive comes one interval after it, not after the last keep-alive.
      const id = await enqueue(alice);
      await state.start(id);
      await state.fail(id, 'resets the keep-alive clock');
      await readFrames(() => frames.some((f) => f.text.startsWith('event: media_generation_completed')) && frames.at(-1)!.text === ': keep-alive');
      await readFrames(() => frames.length >= 6);
    } finally {
      await reader.cancel();
    }
    const gaps = frames.slice(1).map((f, i) => ({ text: f.text.split('\n')[0], ms: f.at - frames[i].at }));
    for (const gap of gaps.filter((g) => g.text === ': keep-alive')) {
      // The old check ran every interval/3, so an idle stream waited up to 4/3 of the interval.
      expect(gap.ms).toBeGreaterThanOrEqual(KEEPALIVE_MS - 20);
      expect(gap.ms).toBeLessThanOrEqual(KEEPALIVE_MS + 150);
    }
    expect(gaps.filter((g) => g.text === ': keep-alive').length).toBeGreaterThanOrEqual(4);
  }, 20_000);
});
