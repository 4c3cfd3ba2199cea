import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import { ModelCatalog, type EngineConfig, type MediaModelDefinition } from '@atelier/models';
import { waitFor } from '@atelier/testing';
import { EngineRegistry, GenerationCancelledError } from './index';
import { testEngineEnvironment } from './engine-environment.harness';

/** A fake model provider: a real HTTP server whose routes each test suite defines. */
interface FakeUpstream {
  base: string;
  requests: { method: string; path: string; headers: IncomingMessage['headers']; body: Buffer }[];
  /** Requests whose client hung up before an answer (aborted upstream calls). */
  abandoned: string[];
  close(): Promise<void>;
}

type Route = (req: IncomingMessage, res: ServerResponse, body: Buffer, base: string) => void;

async function fakeUpstream(route: (method: string, path: string) => Route | undefined): Promise<FakeUpstream> {
  const requests: FakeUpstream['requests'] = [];
  const abandoned: string[] = [];
  let base = '';
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const path = (req.url ?? '').split('?')[0];
    requests.push({ method: req.method ?? '', path, headers: req.headers, body });
    res.on('close', () => {
      if (!res.writableEnded) abandoned.push(path);
    });
    const handler = route(req.method ?? '', path);
    if (!handler) res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ detail: `no route ${req.method} ${path}` }));
    else handler(req, res, body, base);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base,
    requests,
    abandoned,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const json = (res: ServerResponse, status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));

const base = ModelCatalog.fromDirectory();
/** A catalog model like a built-in one but served by a remote engine; validated like any catalog file. */
function remoteModel(like: string, id: string, engine: EngineConfig): MediaModelDefinition {
  const definition = { ...structuredClone(base.get(like)!), id, engine };
  return ModelCatalog.fromDefinitions([definition]).get(id) as MediaModelDefinition;
}

const env = testEngineEnvironment({ secret: (name) => (name === 'FAKE_PROVIDER_KEY' ? 'sk-test' : undefined) });
const run = (model: MediaModelDefinition, params: Record<string, unknown>, signal = new AbortController().signal) =>
  new EngineRegistry(env).engineFor(model).run({ model, params, signal });

let png: Buffer;
const mp4 = Buffer.concat([Buffer.from('000000186674797069736f6d0000020069736f6d', 'hex'), Buffer.alloc(64)]);
beforeAll(async () => {
  png = await sharp({ create: { width: 64, height: 32, channels: 3, background: '#33aa55' } }).png().toBuffer();
});

describe('OpenAI Images-compatible engine', () => {
  let upstream: FakeUpstream;
  let model: MediaModelDefinition;
  let editModel: MediaModelDefinition;

  beforeAll(async () => {
    upstream = await fakeUpstream((method, path) => {
      if (method === 'GET' && path === '/assets/out.png') return (_q, res) => res.writeHead(200, { 'content-type': 'image/png' }).end(png);
      if (method === 'POST' && path === '/v1/images/generations')
        return (req, res, body, b) => {
          if (req.headers.authorization !== 'Bearer sk-test') return json(res, 401, { error: { message: 'Incorrect API key provided' } });
          const p = JSON.parse(body.toString()) as { prompt: string; n?: number };
          if (p.prompt.includes('reject')) return json(res, 400, { error: { message: 'Your request was rejected by the safety system.' } });
          if (p.prompt.includes('hang')) return; // never answers
          const item = p.prompt.includes('link') ? { url: `${b}/assets/out.png` } : { b64_json: png.toString('base64') };
          json(res, 200, { created: 1700000000, data: Array.from({ length: p.n ?? 1 }, () => item) });
        };
      if (method === 'POST' && path === '/v1/images/edits')
        return async (req, res, body) => {
          const form = await new Response(new Uint8Array(body), { headers: { 'content-type': String(req.headers['content-type']) } }).formData();
          const image = form.get('image') as Blob | null;
          if (!image) return json(res, 400, { error: { message: 'image is required' } });
          // "Edits" by echoing the received file back, proving the upload arrived intact.
          json(res, 200, { created: 1700000000, data: [{ b64_json: Buffer.from(await image.arrayBuffer()).toString('base64') }] });
        };
      return undefined;
    });
    const engine = { type: 'openai-images' as const, base_url: `${upstream.base}/v1`, upstream_model: 'gpt-image-1', api_key_env: 'FAKE_PROVIDER_KEY' };
    model = remoteModel('local-image', 'remote-image', engine);
    editModel = remoteModel('local-image-edit', 'remote-edit', engine);
  });
  afterAll(() => upstream.close());

  it('generates through /images/generations with the key, model and mapped size', async () => {
    const result = await run(model, { prompt: 'a red fox', aspect_ratio: '16:9', output_format: 'webp', output_quality: 70 });
    expect(result.outputs).toHaveLength(1);
    expect(result.outputs[0]).toMatchObject({ contentType: 'image/png', extension: 'png' });
    expect(result.outputs[0].data.equals(png)).toBe(true);
    const sent = upstream.requests.find((r) => r.path === '/v1/images/generations')!;
    expect(sent.headers.authorization).toBe('Bearer sk-test');
    expect(JSON.parse(sent.body.toString())).toMatchObject({ model: 'gpt-image-1', prompt: 'a red fox', size: '1536x1024', output_format: 'webp', output_compression: 70 });
  });

  it('downloads images the provider returns as URLs', async () => {
    const result = await run(model, { prompt: 'a link please' });
    expect(result.outputs[0].data.equals(png)).toBe(true);
  });

  it('uploads the input image to /images/edits as multipart', async () => {
    const result = await run(editModel, { prompt: 'make it blue', input_image: `data:image/png;base64,${png.toString('base64')}` });
    expect(result.outputs[0].data.equals(png)).toBe(true);
    const sent = upstream.requests.find((r) => r.path === '/v1/images/edits')!;
    expect(String(sent.headers['content-type'])).toMatch(/^multipart\/form-data; boundary=/);
    expect(sent.body.toString('latin1')).toContain('name="prompt"');
  });

  it("reports the provider's error as a 502 with its message", async () => {
    await expect(run(model, { prompt: 'please reject this' })).rejects.toMatchObject({
      status: 502,
      type: 'upstream_error',
      message: expect.stringContaining('HTTP 400: Your request was rejected by the safety system.'),
    });
  });

  it('aborts the upstream request when cancelled', async () => {
    const controller = new AbortController();
    const pending = run(model, { prompt: 'hang forever' }, controller.signal);
    await waitFor(() => upstream.requests.some((r) => r.path === '/v1/images/generations' && r.body.toString().includes('hang forever')), {
      description: 'the upstream call',
    });
    controller.abort();
    await expect(pending).rejects.toBeInstanceOf(GenerationCancelledError);
    await waitFor(() => upstream.abandoned.includes('/v1/images/generations'), { description: 'the upstream connection to be dropped' });
  });

  it('is unavailable (503) when its API key variable is not set', async () => {
    const keyless = remoteModel('local-image', 'keyless', { type: 'openai-images', base_url: upstream.base, upstream_model: 'x', api_key_env: 'NOT_SET_ANYWHERE' });
    await expect(run(keyless, { prompt: 'x' })).rejects.toMatchObject({ status: 503, message: expect.stringContaining('NOT_SET_ANYWHERE') });
  });
});

describe('prediction engine, Replicate style', () => {
  let upstream: FakeUpstream;
  const predictions = new Map<string, { polls: number; input: Record<string, unknown>; canceled: boolean }>();
  let next = 0;

  beforeAll(async () => {
    upstream = await fakeUpstream((method, path) => {
      if (method === 'GET' && path === '/files/out.png') return (_q, res) => res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(png);
      if (method === 'POST' && (path === '/v1/models/acme/painter/predictions' || path === '/v1/predictions'))
        return (_req, res, body, b) => {
          const id = `p${++next}`;
          const parsed = JSON.parse(body.toString()) as { input: Record<string, unknown> };
          predictions.set(id, { polls: 0, input: parsed.input, canceled: false });
          json(res, 201, { id, status: 'starting', urls: { get: `${b}/v1/predictions/${id}`, cancel: `${b}/v1/predictions/${id}/cancel` } });
        };
      const poll = /^\/v1\/predictions\/(p\d+)$/.exec(path);
      if (method === 'GET' && poll)
        return (_req, res, _body, b) => {
          const p = predictions.get(poll[1])!;
          p.polls += 1;
          const prompt = String(p.input.prompt);
          if (p.canceled) return json(res, 200, { id: poll[1], status: 'canceled' });
          if (prompt.includes('forever') || p.polls < 3) return json(res, 200, { id: poll[1], status: 'processing' });
          if (prompt.includes('fail')) return json(res, 200, { id: poll[1], status: 'failed', error: 'NSFW content detected' });
          json(res, 200, { id: poll[1], status: 'succeeded', output: [`${b}/files/out.png`] });
        };
      const cancel = /^\/v1\/predictions\/(p\d+)\/cancel$/.exec(path);
      if (method === 'POST' && cancel)
        return (_req, res) => {
          predictions.get(cancel[1])!.canceled = true;
          json(res, 200, { id: cancel[1], status: 'canceled' });
        };
      return undefined;
    });
  });
  afterAll(() => upstream.close());

  const model = () =>
    remoteModel('local-image', 'replicate-image', {
      type: 'prediction',
      style: 'replicate',
      base_url: `${upstream.base}/v1`,
      upstream_model: 'acme/painter',
      api_key_env: 'FAKE_PROVIDER_KEY',
    });

  it('submits, polls with backoff until it succeeds, and downloads the output', async () => {
    const result = await run(model(), { prompt: 'a lighthouse', seed: 9, response_format: 'b64_json', target_namespace: 'x' });
    expect(result.outputs[0]).toMatchObject({ contentType: 'image/png', extension: 'png' });
    expect(result.outputs[0].data.equals(png)).toBe(true);
    expect(result.seed).toBe(9);
    const submit = upstream.requests.find((r) => r.path === '/v1/models/acme/painter/predictions')!;
    expect(submit.headers.authorization).toBe('Bearer sk-test');
    // Only the model's own parameters travel upstream.
    expect(JSON.parse(submit.body.toString()).input).toEqual(expect.objectContaining({ prompt: 'a lighthouse', seed: 9 }));
    expect(JSON.parse(submit.body.toString()).input).not.toHaveProperty('response_format');
    expect(upstream.requests.filter((r) => r.path.startsWith('/v1/predictions/p') && r.method === 'GET').length).toBeGreaterThanOrEqual(3);
  });

  it('pins a version through POST /predictions when the catalog names one', async () => {
    const pinned = remoteModel('local-image', 'replicate-pinned', {
      type: 'prediction',
      base_url: `${upstream.base}/v1`,
      upstream_model: 'acme/painter',
      version: 'abc123',
    });
    await run(pinned, { prompt: 'versioned' });
    const submit = upstream.requests.filter((r) => r.path === '/v1/predictions').at(-1)!;
    expect(JSON.parse(submit.body.toString())).toMatchObject({ version: 'abc123', input: { prompt: 'versioned' } });
  });

  it('reports a failed prediction with the provider error', async () => {
    await expect(run(model(), { prompt: 'this will fail' })).rejects.toMatchObject({ status: 502, message: expect.stringContaining('NSFW content detected') });
  });

  it('cancels the upstream prediction when the caller goes away', async () => {
    const controller = new AbortController();
    const pending = run(model(), { prompt: 'run forever' }, controller.signal);
    const id = await waitFor(() => [...predictions.entries()].find(([, p]) => p.input.prompt === 'run forever' && p.polls > 0)?.[0], {
      description: 'the prediction to be polled',
    });
    controller.abort();
    await expect(pending).rejects.toBeInstanceOf(GenerationCancelledError);
    expect(predictions.get(id)!.canceled).toBe(true);
    expect(upstream.requests.some((r) => r.method === 'POST' && r.path === `/v1/predictions/${id}/cancel`)).toBe(true);
  });
});

describe('prediction engine, fal queue style', () => {
  let upstream: FakeUpstream;
  const requests = new Map<string, { polls: number; input: Record<string, unknown>; cancelled: boolean }>();
  let next = 0;

  beforeAll(async () => {
    upstream = await fakeUpstream((method, path) => {
      if (method === 'GET' && path === '/cdn/out.png') return (_q, res) => res.writeHead(200, { 'content-type': 'image/png' }).end(png);
      if (method === 'GET' && path === '/cdn/out.mp4') return (_q, res) => res.writeHead(200, { 'content-type': 'video/mp4' }).end(mp4);
      if (method === 'POST' && (path === '/fal-ai/flux/dev' || path === '/fal-ai/kling/video'))
        return (req, res, body, b) => {
          if (req.headers.authorization !== 'Key sk-test') return json(res, 401, { detail: 'Unauthorized' });
          const id = `r${++next}`;
          requests.set(id, { polls: 0, input: JSON.parse(body.toString()), cancelled: false });
          const own = `${b}${path}/requests/${id}`;
          json(res, 200, { request_id: id, status_url: `${own}/status`, response_url: own, cancel_url: `${own}/cancel` });
        };
      const m = /^\/fal-ai\/(flux\/dev|kling\/video)\/requests\/(r\d+)(\/status|\/cancel)?$/.exec(path);
      if (!m) return undefined;
      const [, app, id, action] = m;
      const r = requests.get(id)!;
      if (action === '/status' && method === 'GET')
        return (_req, res) => {
          r.polls += 1;
          const status = r.input.prompt === 'forever' || r.polls < 2 ? 'IN_QUEUE' : r.polls < 3 ? 'IN_PROGRESS' : 'COMPLETED';
          json(res, 200, { status });
        };
      if (action === '/cancel' && method === 'PUT')
        return (_req, res) => {
          r.cancelled = true;
          json(res, 202, { status: 'CANCELLATION_REQUESTED' });
        };
      if (!action && method === 'GET')
        return (_req, res, _body, b) =>
          app === 'kling/video'
            ? json(res, 200, { video: { url: `${b}/cdn/out.mp4`, content_type: 'video/mp4' } })
            : json(res, 200, { images: [{ url: `${b}/cdn/out.png`, content_type: 'image/png', width: 64, height: 32 }], seed: 777 });
      return undefined;
    });
  });
  afterAll(() => upstream.close());

  const falModel = (like: string, id: string, upstreamModel: string) =>
    remoteModel(like, id, { type: 'prediction', style: 'fal', base_url: upstream.base, upstream_model: upstreamModel, api_key_env: 'FAKE_PROVIDER_KEY' });

  it('queues, polls the status until COMPLETED, fetches the result and reports its seed', async () => {
    const result = await run(falModel('local-image', 'fal-image', 'fal-ai/flux/dev'), { prompt: 'a castle' });
    expect(result.outputs[0].data.equals(png)).toBe(true);
    expect(result.seed).toBe(777);
    expect(upstream.requests.find((r) => r.method === 'POST')!.headers.authorization).toBe('Key sk-test');
  });

  it('returns videos for video models', async () => {
    const result = await run(falModel('local-video', 'fal-video', 'fal-ai/kling/video'), { prompt: 'a wave', duration: 5 });
    expect(result.outputs[0]).toMatchObject({ contentType: 'video/mp4', extension: 'mp4' });
  });

  it('cancels the queued request when the caller goes away', async () => {
    const controller = new AbortController();
    const pending = run(falModel('local-image', 'fal-image', 'fal-ai/flux/dev'), { prompt: 'forever' }, controller.signal);
    const id = await waitFor(() => [...requests.entries()].find(([, r]) => r.input.prompt === 'forever' && r.polls > 0)?.[0], {
      description: 'the request to be polled',
    });
    controller.abort();
    await expect(pending).rejects.toBeInstanceOf(GenerationCancelledError);
    expect(requests.get(id)!.cancelled).toBe(true);
  });
});

describe("remote engines' retries (the policy chat's upstreams use)", () => {
  let upstream: FakeUpstream;
  /** Failures still to answer per prompt, before the image. */
  const failuresLeft = new Map<string, { status: number; left: number; retryAfter?: string }>();

  beforeAll(async () => {
    upstream = await fakeUpstream((method, path) => {
      if (method !== 'POST' || path !== '/v1/images/generations') return undefined;
      return (_req, res, body) => {
        const { prompt } = JSON.parse(body.toString()) as { prompt: string };
        const failing = failuresLeft.get(prompt);
        if (failing && failing.left > 0) {
          failing.left--;
          return res
            .writeHead(failing.status, { 'content-type': 'application/json', ...(failing.retryAfter ? { 'retry-after': failing.retryAfter } : {}) })
            .end(JSON.stringify({ error: { message: `busy (${failing.status})` } }));
        }
        json(res, 200, { created: 1700000000, data: [{ b64_json: png.toString('base64') }] });
      };
    });
  });
  afterAll(() => upstream.close());

  const model = (extra: Record<string, number> = {}) =>
    remoteModel('local-image', `retrying-${Object.values(extra).join('-') || 'default'}`, {
      type: 'openai-images',
      base_url: `${upstream.base}/v1`,
      upstream_model: 'gpt-image-1',
      retry_backoff_ms: 1,
      ...extra,
    } as EngineConfig);
  const sent = (prompt: string) => upstream.requests.filter((r) => JSON.parse(r.body.toString() || '{}').prompt === prompt).length;

  it('retries a 503 and a 429 (max_retries, default 2) and answers with the image', async () => {
    failuresLeft.set('two 503s', { status: 503, left: 2 });
    failuresLeft.set('one 429', { status: 429, left: 1, retryAfter: '0' });
    expect((await run(model(), { prompt: 'two 503s' })).outputs[0].data.equals(png)).toBe(true);
    expect((await run(model(), { prompt: 'one 429' })).outputs[0].data.equals(png)).toBe(true);
    expect([sent('two 503s'), sent('one 429')]).toEqual([3, 2]);
  });

  it('gives up after its retries, at once when asked to wait past 5 s, and never retries a refused request', async () => {
    failuresLeft.set('always 502', { status: 502, left: 99 });
    await expect(run(model({ max_retries: 1 }), { prompt: 'always 502' })).rejects.toMatchObject({ status: 502, message: expect.stringContaining('HTTP 502') });
    expect(sent('always 502')).toBe(2);
    failuresLeft.set('wait a minute', { status: 429, left: 99, retryAfter: '60' });
    await expect(run(model(), { prompt: 'wait a minute' })).rejects.toMatchObject({ status: 502, message: expect.stringContaining('HTTP 429') });
    expect(sent('wait a minute')).toBe(1);
    failuresLeft.set('bad request', { status: 400, left: 99 });
    await expect(run(model(), { prompt: 'bad request' })).rejects.toMatchObject({ status: 502, message: expect.stringContaining('HTTP 400') });
    expect(sent('bad request')).toBe(1);
  });
});
