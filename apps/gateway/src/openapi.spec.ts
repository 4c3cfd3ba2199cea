import Ajv2020 from 'ajv/dist/2020';
import { Validator } from '@seriousme/openapi-schema-validator';
import { parseCreateFineTune, SCRIPT_TYPES, SUPPORTED_BASE_MODELS, TRAINING_PARAMS } from '@atelier/fine-tune';
import { openApiPath } from '@atelier/openapi';
import { registeredRoutes } from '@atelier/runtime';
import { startGateway, type GatewayHarness } from './gateway.harness';

type Doc = { openapi: string; paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: object }> }; security?: unknown[] }>> };

/**
 * Browser UIs, not API: the reference page and its static files, and the operator's queue board
 * (Bull Board's own page and XHR routes). Everything else the gateway serves must be described.
 */
const UI_ROUTES = [/^\/docs(\/|$)/, /^\/admin\/queues(\/|$)/];

describe('API description', () => {
  let gw: GatewayHarness;
  let doc: Doc;
  const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
  const body = (path: string, method = 'post') => doc.paths[path][method].requestBody!.content['application/json'].schema;
  const accepts = (path: string, value: unknown) => ajv.validate(body(path), value);

  beforeAll(async () => {
    gw = await startGateway();
    const res = await gw.http.request<Doc>('GET', '/api/openapi.json');
    expect(res.status).toBe(200);
    doc = res.body;
  });
  afterAll(() => gw?.close());

  it('is a valid OpenAPI 3.1 document, served without a key', async () => {
    expect(doc.openapi).toBe('3.1.0');
    const result = await new Validator().validate(doc as unknown as Parameters<Validator['validate']>[0]);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('describes every route the gateway serves, and no route it does not', () => {
    const served = registeredRoutes(gw.app).filter((r) => r.method !== 'HEAD' && !UI_ROUTES.some((ui) => ui.test(r.url)));
    // Read at run time from Fastify's route table: a new controller (chat included) shows up here by itself.
    expect(served.length).toBeGreaterThan(30);
    expect(served.map((r) => `${r.method} ${r.url}`)).toContain('POST /api/ai/chat/completions');
    const missing = served.filter((r) => !doc.paths[openApiPath(r.url)]?.[r.method.toLowerCase()]).map((r) => `${r.method} ${r.url}`);
    expect(missing).toEqual([]);
    const routes = new Set(served.map((r) => `${r.method.toLowerCase()} ${openApiPath(r.url)}`));
    const extra = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`)).filter((op) => !routes.has(op));
    expect(extra).toEqual([]);
  });

  it('uses the validators\' own schemas for request bodies', () => {
    // Every model the catalog has for an endpoint is an alternative of its body.
    expect(accepts('/api/ai/images/generate', { model: 'local-image', prompt: 'a fox', aspect_ratio: '16:9' })).toBe(true);
    expect(accepts('/api/ai/images/generate', { model: 'local-image' })).toBe(false);
    expect(accepts('/api/ai/images/generate', { model: 'local-image', prompt: 'x', num_inference_steps: 500 })).toBe(false);
    expect(accepts('/api/ai/videos/generate', { model: 'local-video', prompt: 'waves', multi_prompt: [{ prompt: 'a', duration: 2 }] })).toBe(false);
    expect(accepts('/api/ai/queue', { model: 'local-video', prompt: 'waves', num_generations: 4 })).toBe(true);
    expect(accepts('/api/ai/queue', { model: 'local-image', prompt: 'x', num_generations: 5 })).toBe(false);
    expect(accepts('/api/ai/chat/completions', { model: 'local-chat', messages: [{ role: 'user', content: 'hi' }] })).toBe(true);
    // zod contracts of the admin and repository routes.
    expect(accepts('/api/admin/users', { username: 'alice', credits: '10.5' })).toBe(true);
    expect(accepts('/api/admin/users', { username: 'alice', role: 'root' })).toBe(false);
    expect(accepts('/api/repos', { namespace: 'alice', name: 'data' })).toBe(true);
    expect(accepts('/api/repos', { namespace: 'alice' })).toBe(false);
  });

  it('describes fine-tune bodies from the training_params tables, agreeing with the validator', () => {
    const path = '/api/repos/{namespace}/{repo}/fine_tunes';
    for (const scriptType of SCRIPT_TYPES) {
      const params: Record<string, unknown> = {};
      for (const [name, spec] of Object.entries(TRAINING_PARAMS[scriptType]))
        if ('required' in spec && spec.required) params[name] = spec.type === 'string[]' ? ['image'] : 'column';
      const good = { resource: 'main/train.parquet', base_model: SUPPORTED_BASE_MODELS[scriptType][0], script_type: scriptType, training_params: params };
      expect({ scriptType, problems: parseCreateFineTune(good).problems }).toEqual({ scriptType, problems: [] });
      expect({ scriptType, valid: accepts(path, good) }).toEqual({ scriptType, valid: true });
      for (const bad of [
        { ...good, training_params: { ...params, batch_size: 0 } },
        { ...good, training_params: { ...params, not_a_param: 1 } },
        { ...good, base_model: 'no/such-model' },
      ]) {
        expect(parseCreateFineTune(bad).problems.length).toBeGreaterThan(0);
        expect({ scriptType, bad, valid: accepts(path, bad) }).toEqual({ scriptType, bad, valid: false });
      }
    }
  });

  it('serves an interactive reference page at /docs from local files', async () => {
    const page = await gw.http.request('GET', '/docs');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.text).toContain('/api/openapi.json');
    const assets = [...page.text.matchAll(/(?:src|href)="(\/docs\/[^"]+)"/g)].map((m) => m[1]);
    expect(assets).toEqual(expect.arrayContaining(['/docs/assets/swagger-ui-bundle.js', '/docs/assets/swagger-ui.css']));
    for (const asset of assets) {
      const res = await gw.app.getHttpAdapter().getInstance().inject({ method: 'GET', url: asset });
      expect({ asset, status: res.statusCode }).toEqual({ asset, status: 200 });
      expect(res.rawPayload.length).toBeGreaterThan(100);
    }
    const bundle = await gw.app.getHttpAdapter().getInstance().inject({ method: 'GET', url: '/docs/assets/swagger-ui-bundle.js' });
    expect(bundle.headers['content-type']).toMatch(/javascript/);
    expect(bundle.body).toContain('SwaggerUIBundle');
    expect((await gw.http.request('GET', '/docs/assets/..%2Fpackage.json')).status).toBe(404);
  });

  it('puts the queue board behind the admin token', async () => {
    const denied = await gw.http.request('GET', '/admin/queues');
    expect(denied.status).toBe(401);
    expect(denied.headers['www-authenticate']).toMatch(/^Basic /);
    expect(denied.body).toMatchObject({ status: 'error', status_message: 'authentication_required' });
    expect((await gw.http.request('GET', '/admin/queues', { token: 'wrong-token-wrong-token' })).status).toBe(401);
    const basic = Buffer.from(`admin:${gw.adminToken}`).toString('base64');
    const page = await gw.http.request('GET', '/admin/queues', { headers: { authorization: `Basic ${basic}` } });
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    const api = await gw.http.request<{ queues: { name: string }[] }>('GET', '/admin/queues/api/queues', { token: gw.adminToken });
    expect(api.status).toBe(200);
    // The BullMQ (work) queues; request/response calls travel on Redis streams, not BullMQ.
    expect(api.body.queues.map((q) => q.name).sort()).toEqual(['batch-line', 'batch-step', 'completion-export', 'fine-tune-tokenize', 'generation-image', 'generation-video', 'response-background', 'webhook-delivery']);
  });
});
