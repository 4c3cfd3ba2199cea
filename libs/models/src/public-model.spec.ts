import { ModelCatalog, toPublicModel } from './index';
import * as fs from 'node:fs';
import * as path from 'node:path';
import Ajv2020 from 'ajv/dist/2020';

describe('toPublicModel', () => {
  const catalog = ModelCatalog.fromDirectory();

  it('returns the documented fields with exact price strings', () => {
    const chat = toPublicModel(catalog.get('local-chat')!);
    expect(Object.keys(chat).sort()).toEqual(
      [
        'capabilities',
        'created',
        'description',
        'display_name',
        'endpoint',
        'id',
        'json_request_schema',
        'object',
        'owned_by',
        'pricing',
        'request_schema',
      ].sort(),
    );
    expect(chat).toMatchObject({
      id: 'local-chat',
      object: 'model',
      owned_by: 'atelier',
      endpoint: '/chat/completions',
      capabilities: { input: ['text', 'image', 'video'], output: ['text'] },
      pricing: { method: 'token', input_cost_per_token: '0.000001', output_cost_per_token: '0.000002' },
    });
    expect(JSON.stringify(toPublicModel(catalog.get('local-video')!).pricing)).toBe(
      '{"method":"per_video_output_second","cost_per_second":"0.02"}',
    );
    expect(JSON.stringify(toPublicModel(catalog.get('local-image')!).pricing)).toBe('{"method":"per_image","cost_per_image":"0.01"}');
  });

  it('never exposes the engine, upstream URLs or secret names', () => {
    const source = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'catalog', 'local-image.json'), 'utf8'));
    const remote = ModelCatalog.fromDefinitions([
      {
        ...source,
        id: 'remote-image',
        engine: {
          type: 'openai-images',
          base_url: 'https://upstream.internal.example/v1',
          api_key_env: 'UPSTREAM_IMAGES_API_KEY',
          upstream_model: 'secret-upstream-model',
        },
      },
    ]).get('remote-image')!;
    const serialized = JSON.stringify(toPublicModel(remote));
    expect(serialized).not.toContain('engine');
    expect(serialized).not.toContain('upstream.internal.example');
    expect(serialized).not.toContain('UPSTREAM_IMAGES_API_KEY');
    expect(serialized).not.toContain('secret-upstream-model');
  });

  it('publishes the stored parameters as request_schema and a complete body schema as json_request_schema', () => {
    const image = catalog.get('local-image')!;
    const model = toPublicModel(image);
    expect(model.request_schema).toEqual(image.parameters);
    expect(model.json_request_schema.properties?.model).toMatchObject({ const: 'local-image' });
    expect(model.json_request_schema.required).toEqual(expect.arrayContaining(['model', 'prompt']));
    expect(model.json_request_schema.additionalProperties).toBe(false);
    expect(model.json_request_schema.properties?.num_inference_steps).toMatchObject({ minimum: 1, maximum: 50, 'x-order': 6 });
  });

  it('publishes schemas a client can compile with a stock JSON Schema validator', () => {
    const ajv = new Ajv2020({ strict: false, validateFormats: false, discriminator: true });
    for (const definition of catalog.list()) {
      const { json_request_schema } = toPublicModel(definition);
      expect(() => ajv.compile(json_request_schema)).not.toThrow();
    }
  });

  it('gives callers their own copy of the schemas', () => {
    const image = catalog.get('local-image')!;
    const first = toPublicModel(image);
    first.request_schema.title = 'changed';
    first.json_request_schema.required?.push('changed');
    const second = toPublicModel(image);
    expect(second.request_schema.title).toBeUndefined();
    expect(second.json_request_schema.required).not.toContain('changed');
  });
});
