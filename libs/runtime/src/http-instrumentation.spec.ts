import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LoggerService } from '@nestjs/common';
import Fastify, { type FastifyInstance } from 'fastify';
import { Metrics, requestContext } from '@atelier/observability';
import { metricValue, waitFor } from '@atelier/testing';
import { instrumentHttp } from './http-instrumentation';

interface Line {
  entry: Record<string, unknown>;
  context: unknown;
  /** The request id of the async context the line was written in. */
  requestId: string | undefined;
}

/** A Nest logger that keeps what it is given, with the request context it was given it in. */
function capturingLogger(lines: Line[]): LoggerService {
  const keep = (entry: unknown, context?: unknown) => void lines.push({ entry: entry as Record<string, unknown>, context, requestId: requestContext.current()?.requestId });
  return { log: keep, error: keep, warn: keep };
}

/** Measured and logged per request, over real HTTP: the figures operators read off every service. */
describe('instrumentHttp', () => {
  let app: FastifyInstance;
  let metrics: Metrics;
  let base: string;
  const lines: Line[] = [];
  /** Requests whose handler saw the request id as its async context (the handler's log lines and enqueued jobs carry it). */
  const seenInHandler: (string | undefined)[] = [];
  let releaseSlow: (() => void) | undefined;

  async function start(accessLog: boolean): Promise<void> {
    metrics = new Metrics('instrumentation-spec');
    app = Fastify({ genReqId: (req) => String(req.headers['x-request-id'] ?? 'generated') });
    instrumentHttp(app, metrics, capturingLogger(lines), accessLog);
    app.get('/items/:id', async () => {
      await new Promise((r) => setImmediate(r));
      seenInHandler.push(requestContext.current()?.requestId);
      return { ok: true };
    });
    app.post('/echo', async (req) => {
      seenInHandler.push(requestContext.current()?.requestId);
      return req.body;
    });
    app.get('/stream', (_req, reply) => {
      reply.hijack();
      reply.raw.writeHead(200, { 'content-type': 'text/event-stream' });
      reply.raw.end('data: done\n\n');
    });
    app.get('/slow', () => new Promise((resolve) => (releaseSlow = () => resolve({ late: true }))));
    app.get('/health/live', async () => ({ status: 'ok' }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  }

  const count = async (labels: Record<string, string>) => metricValue(await metrics.registry.metrics(), 'atelier_http_request_duration_seconds_count', labels);

  afterEach(async () => {
    releaseSlow?.();
    releaseSlow = undefined;
    await app?.close();
    lines.length = 0;
    seenInHandler.length = 0;
  });

  it('records each request by route pattern and status, with one access line written in its request context', async () => {
    await start(true);
    const res = await fetch(`${base}/items/42?verbose=1`, { headers: { 'x-request-id': 'req-items-1' } });
    expect(res.status).toBe(200);
    await res.json();
    const line = await waitFor(() => lines.find((l) => l.context === 'HTTP'), { description: 'the access line' });
    expect(line.entry).toMatchObject({ msg: expect.stringMatching(/^GET \/items\/42 200 \d+ ms$/), method: 'GET', route: '/items/:id', status: 200, ms: expect.any(Number) });
    expect(line.requestId).toBe('req-items-1');
    expect(seenInHandler).toEqual(['req-items-1']);
    expect(await count({ method: 'GET', route: '/items/:id', status_code: '200' })).toBe(1);

    // A body whose end comes in a later packet, read in a later turn of the event loop (as a
    // large or slow upload's is): the handler still runs in the request's context.
    const echoed = await new Promise<string>((resolve, reject) => {
      const post = http.request(`${base}/echo`, { method: 'POST', headers: { 'x-request-id': 'req-echo-1', 'content-type': 'application/json', 'content-length': '7' } }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d)).on('end', () => resolve(text));
      });
      post.on('error', reject);
      post.write('{"a":');
      setTimeout(() => post.end('1}'), 50);
    });
    expect(JSON.parse(echoed)).toEqual({ a: 1 });
    expect(seenInHandler).toEqual(['req-items-1', 'req-echo-1']);
    await waitFor(async () => (await count({ method: 'POST', route: '/echo', status_code: '200' })) === 1, { description: 'the POST to be counted' });
  });

  it('counts streamed answers that take the reply over, and a client gone before its answer as 499', async () => {
    await start(true);
    const stream = await fetch(`${base}/stream`);
    expect(await stream.text()).toBe('data: done\n\n');
    await waitFor(async () => (await count({ route: '/stream', status_code: '200' })) === 1, { description: 'the stream to be counted' });

    const req = http.get(`${base}/slow`, { headers: { 'x-request-id': 'req-slow-1' } });
    req.on('error', () => undefined);
    await waitFor(() => releaseSlow !== undefined, { description: 'the slow request to arrive' });
    req.destroy();
    await waitFor(async () => (await count({ route: '/slow', status_code: '499' })) === 1, { description: 'the abandoned request to be counted as 499' });
    const abandoned = await waitFor(() => lines.find((l) => l.entry.route === '/slow'), { description: "the abandoned request's access line" });
    expect(abandoned.entry).toMatchObject({ status: 499 });
    // Ended by the socket, outside the request's own work: the line still names the request.
    expect(abandoned.requestId).toBe('req-slow-1');
  });

  it('writes no access line for probes, nor at all below info, and still measures every request', async () => {
    await start(true);
    expect((await fetch(`${base}/health/live`)).status).toBe(200);
    await waitFor(async () => (await count({ route: '/health/live', status_code: '200' })) === 1, { description: 'the probe to be counted' });
    expect(lines).toEqual([]);
    await app.close();

    await start(false);
    expect((await fetch(`${base}/items/7`)).status).toBe(200);
    await waitFor(async () => (await count({ route: '/items/:id', status_code: '200' })) === 1, { description: 'the request to be counted' });
    expect(lines).toEqual([]);
  });
});
