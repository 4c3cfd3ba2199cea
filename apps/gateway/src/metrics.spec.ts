import http from 'node:http';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { MediaServiceModule } from '@atelier/media';
import { createService } from '@atelier/runtime';
import { createTenant, metricValue as metric, TestHttp, waitFor, type Tenant } from '@atelier/testing';
import { startMediaStack, type MediaStack } from './media.harness';

/** Counters of one app: /metrics after real traffic through the real gateway, services and queues. */
describe('GET /metrics', () => {
  let stack: MediaStack;
  let user: Tenant;
  const scrape = async (app: NestFastifyApplication) => {
    const res = await new TestHttp(app).request('GET', '/metrics');
    expect(res.status).toBe(200);
    expect(String(res.headers['content-type'])).toMatch(/^text\/plain; version=0\.0\.4/);
    return res.text;
  };

  beforeAll(async () => {
    stack = await startMediaStack();
    user = await createTenant(stack.gw.http, stack.gw.adminToken, '5');
  });
  afterAll(() => stack?.close());

  // The queue worker's side (queued generations, their jobs) is scraped from a real worker process
  // in apps/gateway/src/shutdown.spec.ts.
  it('moves HTTP, credit, generation, job, engine and queue metrics with real traffic', async () => {
    const { gw, media } = stack;
    const before = await scrape(gw.app);
    const route = { method: 'POST', route: '/api/ai/images/generate' };
    expect(metric(before, 'atelier_http_request_duration_seconds_count', { ...route, status_code: '200' })).toBeNaN();

    const ok = await gw.http.request('POST', '/api/ai/images/generate', { token: user.apiKey, body: { model: 'local-image', prompt: 'a red kite', seed: 1 } });
    expect(ok.status).toBe(200);
    const missing = await gw.http.request('POST', '/api/ai/images/generate', { token: user.apiKey, body: { model: 'no-such-model', prompt: 'x' } });
    expect(missing.status).toBe(404);
    const queued = await gw.http.request<{ generations: { generation_id: string }[] }>('POST', '/api/ai/queue', {
      token: user.apiKey,
      body: { model: 'local-image', prompt: 'queued kite' },
    });
    expect(queued.status).toBe(200);
    const id = queued.body.generations[0].generation_id;
    expect((await gw.http.request('GET', `/api/ai/queue/${id}`, { token: user.apiKey })).status).toBe(200);

    const after = await scrape(gw.app);
    // Latency histogram by route pattern and status (and the service label every series carries).
    expect(metric(after, 'atelier_http_request_duration_seconds_count', { ...route, status_code: '200', service: 'gateway' })).toBe(1);
    expect(metric(after, 'atelier_http_request_duration_seconds_count', { ...route, status_code: '404' })).toBe(1);
    expect(metric(after, 'atelier_http_request_duration_seconds_count', { method: 'GET', route: '/api/ai/queue/:id', status_code: '200' })).toBeGreaterThanOrEqual(1);
    expect(metric(after, 'atelier_http_request_duration_seconds_bucket', { ...route, status_code: '200', le: '+Inf' })).toBe(1);
    // Credits: the sync image (0.01) and the queued one (0.01) were reserved; the sync one was settled here.
    expect(metric(after, 'atelier_credits_reserved_total') - (metric(before, 'atelier_credits_reserved_total') || 0)).toBeCloseTo(0.02, 6);
    // The settle lands just after the answer (it may wait up to 10 ms for company), so it is waited for.
    const settledSince = async () => metric(await scrape(gw.app), 'atelier_credits_settled_total') - (metric(before, 'atelier_credits_settled_total') || 0);
    await waitFor(async () => (await settledSince()) > 0, { description: 'the sync render to be settled' });
    expect(await settledSince()).toBeCloseTo(0.01, 6);
    expect(metric(after, 'atelier_generations_total', { model: 'local-image', outcome: 'succeeded', mode: 'sync' })).toBe(1);
    // Queue depth is read from Redis at scrape time; the gateway reports every queue (no worker
    // runs the queued generation here, so it is still waiting).
    expect(metric(after, 'atelier_queue_jobs', { queue: 'generation-image', state: 'waiting' })).toBe(1);
    expect(metric(after, 'atelier_queue_jobs', { queue: 'generation-video', state: 'waiting' })).toBe(0);
    expect(metric(after, 'atelier_queue_jobs', { queue: 'media-render-image', state: 'active' })).toBe(0);
    expect(metric(after, 'process_cpu_seconds_total')).toBeGreaterThan(0);

    // The media service ran the sync render as a job, timing it and the engine.
    const mediaText = await scrape(media);
    expect(metric(mediaText, 'atelier_job_duration_seconds_count', { queue: 'media-render-image', outcome: 'completed', service: 'media' })).toBe(1);
    expect(metric(mediaText, 'atelier_upstream_request_duration_seconds_count', { provider: 'builtin', outcome: 'ok' })).toBe(1);
    expect(metric(mediaText, 'atelier_queue_jobs', { queue: 'media-render-video', state: 'waiting' })).toBe(0);
  });

  it('counts open event streams', async () => {
    const { gw } = stack;
    await gw.app.listen({ port: 0, host: '127.0.0.1' });
    const url = new URL('/api/events', await gw.app.getUrl());
    const req = http.get(url, { headers: { authorization: `Bearer ${user.apiKey}` } });
    const res = await new Promise<http.IncomingMessage>((resolve) => req.on('response', resolve));
    expect(res.statusCode).toBe(200);
    await waitFor(async () => metric(await scrape(gw.app), 'atelier_sse_connections') === 1, { description: 'one open stream' });
    req.destroy();
    await waitFor(async () => metric(await scrape(gw.app), 'atelier_sse_connections') === 0, { description: 'the stream to be gone' });
  });

  it('can require a token', async () => {
    const { gw } = stack;
    const token = 'metrics-token-0123456789';
    const guarded = await createService(
      MediaServiceModule.forRoot({ ...gw.env.config, METRICS_TOKEN: token }),
      { ...gw.env.config, METRICS_TOKEN: token },
      { service: 'media' },
    );
    try {
      const client = new TestHttp(guarded);
      const denied = await client.request('GET', '/metrics');
      expect(denied.status).toBe(401);
      expect(denied.body).toMatchObject({ status: 'error', status_message: 'authentication_required' });
      expect((await client.request('GET', '/metrics', { token })).status).toBe(200);
    } finally {
      await guarded.close();
    }
  });
});
