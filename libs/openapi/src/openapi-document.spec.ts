import { API_SHAPES, GenerationShape } from '@atelier/contracts';
import { ModelCatalog } from '@atelier/models';
import { DocumentedResponses } from '@atelier/testing';
import { buildOpenApiDocument } from './openapi-document';

type Doc = { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: unknown }> }> }>>; components: { schemas: Record<string, unknown> } };

/** The document's answers come from the one declaration of each shape, and the end-to-end check catches a drift. */
describe('the OpenAPI document', () => {
  const doc = buildOpenApiDocument({ catalog: ModelCatalog.fromDirectory(), adminEnabled: true, version: 'test' }) as unknown as Doc;
  const refs = (value: unknown): string[] =>
    value === null || typeof value !== 'object'
      ? []
      : Object.entries(value).flatMap(([k, v]) => (k === '$ref' && typeof v === 'string' ? [v] : refs(v)));

  it('has exactly one component per declared shape, and every answer it names resolves to one', () => {
    expect(Object.keys(doc.components.schemas).sort()).toEqual(Object.keys(API_SHAPES).sort());
    const named = refs(doc.paths).concat(refs(doc.components)).filter((r) => r.startsWith('#/components/schemas/'));
    expect(named.length).toBeGreaterThan(50);
    for (const ref of named) expect(doc.components.schemas).toHaveProperty([ref.slice('#/components/schemas/'.length)]);
  });

  it('describes a shape used inside another by reference, not by a copy', () => {
    expect(doc.components.schemas.GenerationList).toMatchObject({ properties: { generations: { items: { $ref: '#/components/schemas/Generation' } } } });
  });

  describe('the end-to-end check (TestHttp)', () => {
    const check = new DocumentedResponses(doc);
    const generation = {
      generation_id: '01930000-0000-7000-8000-000000000000',
      model_name: 'local-image',
      prompt: 'p',
      media_type: 'image',
      status: 'queued',
      result_url: null,
      error_message: null,
      enqueued_at: 1,
      started_at: null,
      completed_at: null,
      target_namespace: 'n',
      target_repo: null,
      target_directory: null,
      cost: null,
      queue_position: 0,
      progress: null,
      priority: 'normal',
      seed: 7,
    };
    const json = 'application/json; charset=utf-8';

    it('passes an answer that matches its shape (echoed parameters included), as the shape itself does', () => {
      expect(GenerationShape.safeParse(generation).success).toBe(true);
      expect(check.problem('GET', '/api/ai/queue/01930000-0000-7000-8000-000000000000?x=1', 200, json, generation)).toBeUndefined();
    });

    it('fails an answer that lost a field, changed a type, or a status the route does not list', () => {
      const { priority: _dropped, ...without } = generation;
      expect(check.problem('GET', '/api/ai/queue/abc', 200, json, without)).toMatch(/GET \/api\/ai\/queue\/\{id\} 200 does not match its documented schema: .*priority/);
      expect(check.problem('GET', '/api/ai/queue/abc', 200, json, { ...generation, enqueued_at: '1' })).toMatch(/enqueued_at/);
      expect(check.problem('POST', '/api/repos', 202, json, {})).toMatch(/answered 202, a status its description does not list/);
    });

    it('checks errors against the one envelope, and a literal path before a parameter', () => {
      expect(check.problem('GET', '/api/ai/queue/abc', 404, json, { error: { type: 'resource_not_found', title: 'Not found', message: 'x' }, status: 'error', status_message: 'resource_not_found' })).toBeUndefined();
      expect(check.problem('GET', '/api/ai/queue/abc', 404, json, { message: 'x' })).toMatch(/Error|required/);
      expect(check.problem('GET', '/api/webhooks/default/secret', 200, json, { key: 'whsec_x' })).toBeUndefined();
      expect(check.problem('GET', '/api/webhooks/default/secret', 200, json, { key: 'nope' })).toMatch(/must match pattern/);
    });
  });
});
