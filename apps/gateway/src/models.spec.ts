import { createTenant, type Tenant } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';

interface SchemaNode {
  type?: string;
  minimum?: number;
  maximum?: number;
  properties: Record<string, SchemaNode & Record<string, unknown>>;
}
interface ModelBody {
  pricing: Record<string, string>;
  request_schema: SchemaNode;
  json_request_schema: SchemaNode;
}

describe('model catalog API', () => {
  let gw: GatewayHarness;
  let user: Tenant;

  beforeAll(async () => {
    gw = await startGateway();
    user = await createTenant(gw.http, gw.adminToken);
  });
  afterAll(() => gw?.close());

  it.each([
    ['local-chat', '/chat/completions', 'token'],
    ['local-image', '/images/generate', 'per_image'],
    ['local-image-edit', '/images/edit', 'per_image'],
    ['local-video', '/videos/generate', 'per_video_output_second'],
  ])('returns the %s model object', async (id, endpoint, method) => {
    const res = await gw.http.request<ModelBody>('GET', `/api/ai/models/${id}`, { token: user.apiKey });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      id,
      object: 'model',
      created: expect.any(Number),
      owned_by: expect.any(String),
      display_name: expect.any(String),
      description: expect.any(String),
      endpoint,
      capabilities: { input: expect.any(Array), output: expect.any(Array) },
      pricing: { method },
      request_schema: expect.objectContaining({ type: 'object' }),
      json_request_schema: expect.objectContaining({ type: 'object' }),
    });
    // Billing must be observable: every built-in model has a non-zero price.
    const prices = Object.entries(res.body.pricing).filter(([k]) => k !== 'method').map(([, v]) => Number(v));
    expect(prices.length).toBeGreaterThan(0);
    expect(prices.every((p) => p > 0)).toBe(true);
    expect(JSON.stringify(res.body)).not.toMatch(/api_key_env|base_url/);
  });

  it('bounds num_inference_steps of local-image to 1-50 with UI hints', async () => {
    const res = await gw.http.request<ModelBody>('GET', '/api/ai/models/local-image', { token: user.apiKey });
    const steps = res.body.request_schema.properties.num_inference_steps;
    expect(steps).toMatchObject({ type: 'integer', minimum: 1, maximum: 50 });
    expect(steps['x-order']).toEqual(expect.any(Number));
    expect(res.body.json_request_schema.properties.num_inference_steps).toMatchObject({ minimum: 1, maximum: 50 });
    expect(res.body.json_request_schema.properties.model).toBeDefined();
  });

  it('lists models and filters by endpoint and output', async () => {
    const all = await gw.http.request<{ object: string; data: { id: string }[] }>('GET', '/api/ai/models', { token: user.apiKey });
    expect(all.body.object).toBe('list');
    expect(all.body.data.map((m) => m.id).sort()).toEqual(['local-chat', 'local-embed', 'local-image', 'local-image-edit', 'local-video']);
    const embeddings = await gw.http.request<{ data: { id: string }[] }>('GET', '/api/ai/models?output=embedding', { token: user.apiKey });
    expect(embeddings.body.data.map((m) => m.id)).toEqual(['local-embed']);
    const images = await gw.http.request<{ data: { id: string }[] }>('GET', '/api/ai/models?output=image', { token: user.apiKey });
    expect(images.body.data.map((m) => m.id).sort()).toEqual(['local-image', 'local-image-edit']);
    const chat = await gw.http.request<{ data: { id: string }[] }>('GET', '/api/ai/models?endpoint=chat/completions', { token: user.apiKey });
    expect(chat.body.data.map((m) => m.id)).toEqual(['local-chat']);
    const bad = await gw.http.request('GET', '/api/ai/models?endpoint=/nope', { token: user.apiKey });
    expect(bad.status).toBe(400);
  });

  // Answers are serialized once and then sent as text: SDKs only parse them if they still say JSON.
  it('answers JSON, the same on every call, for a model and for each list filter', async () => {
    const bodies = new Map<string, unknown>();
    for (const round of [1, 2])
      for (const path of ['/api/ai/models/local-chat', '/api/ai/models/local-video', '/api/ai/models', '/api/ai/models?output=image', '/api/ai/models?endpoint=/images/edit']) {
        const res = await gw.http.request('GET', path, { token: user.apiKey });
        expect(res.status).toBe(200);
        expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
        if (round === 1) bodies.set(path, res.body);
        else expect(res.body).toEqual(bodies.get(path));
      }
    expect(bodies.get('/api/ai/models/local-video')).toMatchObject({ id: 'local-video' });
    expect((bodies.get('/api/ai/models?endpoint=/images/edit') as { data: { id: string }[] }).data.map((m) => m.id)).toEqual(['local-image-edit']);
    const missing = await gw.http.request<{ error: { type: string } }>('GET', '/api/ai/models/no-such-model', { token: user.apiKey });
    expect(missing.status).toBe(404);
    expect(missing.headers['content-type']).toMatch(/^application\/json/);
    expect(missing.body.error.type).toBe('resource_not_found');
  });
});
