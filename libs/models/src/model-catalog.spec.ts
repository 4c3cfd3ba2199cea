import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ModelCatalog, ModelCatalogError, defaultCatalogDir, type ModelDefinition } from './index';

const BUILTIN_IDS = ['local-chat', 'local-embed', 'local-image', 'local-image-edit', 'local-video'];

function readCatalogFile(id: string): Record<string, unknown> {
  return JSON.parse(fs.readFileSync(path.join(defaultCatalogDir(), `${id}.json`), 'utf8'));
}

function tmpCatalog(files: Record<string, unknown>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'atelier-models-'));
  for (const [name, content] of Object.entries(files)) {
    fs.writeFileSync(path.join(dir, name), typeof content === 'string' ? content : JSON.stringify(content));
  }
  return dir;
}

function loadError(load: () => unknown): string {
  try {
    load();
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error('expected loading to fail');
}

describe('ModelCatalog (built-in catalog)', () => {
  const catalog = ModelCatalog.fromDirectory();

  it('finds the repository catalog directory from the source tree', () => {
    expect(defaultCatalogDir()).toBe(path.resolve(__dirname, '..', 'catalog'));
    expect(defaultCatalogDir('some/dir')).toBe(path.resolve('some/dir'));
  });

  it('loads exactly the five built-in models', () => {
    expect(catalog.list().map((m) => m.id)).toEqual(BUILTIN_IDS);
    for (const id of BUILTIN_IDS) {
      expect(catalog.has(id)).toBe(true);
      expect(catalog.get(id)?.id).toBe(id);
    }
  });

  it('returns undefined for unknown ids', () => {
    expect(catalog.get('nope')).toBeUndefined();
    expect(catalog.has('nope')).toBe(false);
  });

  it('filters by endpoint, input and output modality', () => {
    const ids = (models: ModelDefinition[]) => models.map((m) => m.id);
    expect(ids(catalog.list({ endpoint: '/images/edit' }))).toEqual(['local-image-edit']);
    expect(ids(catalog.list({ output: 'image' }))).toEqual(['local-image', 'local-image-edit']);
    expect(ids(catalog.list({ output: 'video' }))).toEqual(['local-video']);
    expect(ids(catalog.list({ output: 'text' }))).toEqual(['local-chat']);
    expect(ids(catalog.list({ input: 'image' }))).toEqual(['local-chat', 'local-image-edit', 'local-video']);
    expect(ids(catalog.list({ input: 'image', output: 'image' }))).toEqual(['local-image-edit']);
    expect(catalog.list({ output: 'audio' })).toEqual([]);
  });

  it('keeps prices as exact decimal strings', () => {
    expect(catalog.get('local-chat')?.pricing).toEqual({
      method: 'token',
      input_cost_per_token: '0.000001',
      output_cost_per_token: '0.000002',
    });
    expect(catalog.get('local-image')?.pricing).toEqual({ method: 'per_image', cost_per_image: '0.01' });
    expect(catalog.get('local-image-edit')?.pricing).toEqual({ method: 'per_image', cost_per_image: '0.01' });
    expect(catalog.get('local-video')?.pricing).toEqual({ method: 'per_video_output_second', cost_per_second: '0.02' });
  });

  it('gives every parameter its UI hints', () => {
    for (const model of catalog.list()) {
      for (const [name, schema] of Object.entries(model.parameters.properties ?? {})) {
        expect({ name, ...(schema as object) }).toMatchObject({
          name,
          'x-order': expect.any(Number),
          basic: expect.any(Boolean),
          renderType: expect.any(String),
          title: expect.any(String),
        });
      }
    }
  });

  it('hands out read-only definitions', () => {
    const image = catalog.get('local-image');
    expect(() => {
      (image as { pricing: { cost_per_image: string } }).pricing.cost_per_image = '0';
    }).toThrow(TypeError);
    expect(catalog.get('local-image')?.pricing).toEqual({ method: 'per_image', cost_per_image: '0.01' });
  });
});

describe('ModelCatalog loading errors', () => {
  const image = readCatalogFile('local-image');

  it('names the file of a malformed JSON document', () => {
    const dir = tmpCatalog({ 'local-image.json': image, 'broken-model.json': '{"id": "broken",' });
    const message = loadError(() => ModelCatalog.fromDirectory(dir));
    expect(message).toContain(path.join(dir, 'broken-model.json'));
    expect(message).toContain('not valid JSON');
  });

  it('names the file and the field of an invalid definition', () => {
    const dir = tmpCatalog({ 'cheap-image.json': { ...image, id: 'cheap-image', pricing: { method: 'per_image', cost_per_image: 0.01 } } });
    const error = (() => {
      try {
        ModelCatalog.fromDirectory(dir);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(ModelCatalogError);
    expect((error as ModelCatalogError).source).toBe(path.join(dir, 'cheap-image.json'));
    expect((error as Error).message).toContain('pricing.cost_per_image must be a decimal string');
  });

  it('rejects duplicate ids across files', () => {
    const dir = tmpCatalog({ 'a.json': image, 'b.json': image });
    const message = loadError(() => ModelCatalog.fromDirectory(dir));
    expect(message).toContain('b.json');
    expect(message).toContain("duplicate model id 'local-image'");
    expect(message).toContain('a.json');
  });

  it('rejects an unknown endpoint', () => {
    expect(loadError(() => ModelCatalog.fromDefinitions([{ ...image, endpoint: '/audio/speech' }]))).toContain(
      'endpoint must be one of: /chat/completions, /images/generate, /images/edit, /videos/generate',
    );
  });

  it('rejects a pricing method that does not fit the endpoint', () => {
    const pricing = { method: 'per_video_output_second', cost_per_second: '0.02' };
    expect(loadError(() => ModelCatalog.fromDefinitions([{ ...image, pricing }]))).toContain(
      "pricing.method 'per_video_output_second' does not match endpoint /images/generate (expected 'per_image')",
    );
  });

  it('rejects unknown fields and missing required fields', () => {
    const { id: _id, ...withoutId } = image;
    const message = loadError(() => ModelCatalog.fromDefinitions([{ ...withoutId, pricng: {} }]));
    expect(message).toContain('id is required');
    expect(message).toContain("unknown field 'pricng'");
  });

  it('rejects a misspelled JSON Schema keyword in parameters', () => {
    const parameters = structuredClone(image.parameters) as { properties: Record<string, Record<string, unknown>> };
    parameters.properties.seed.maximun = 10;
    expect(loadError(() => ModelCatalog.fromDefinitions([{ ...image, parameters }]))).toContain('unknown keyword: "maximun"');
  });

  it('requires the parameters the endpoint requires', () => {
    const parameters = { ...(image.parameters as object), required: [] };
    expect(loadError(() => ModelCatalog.fromDefinitions([{ ...image, parameters }]))).toContain(
      "parameters.required must include 'prompt' (required by /images/generate)",
    );
  });

  it('accepts secrets only as environment variable names', () => {
    const engine = { type: 'openai-images', base_url: 'https://api.example.com/v1', upstream_model: 'img-1', api_key_env: 'sk-live-123' };
    expect(loadError(() => ModelCatalog.fromDefinitions([{ ...image, engine }]))).toContain('engine.api_key_env must match');
    const withKey = { ...engine, api_key_env: 'EXAMPLE_API_KEY', api_key: 'sk-live-123' };
    expect(loadError(() => ModelCatalog.fromDefinitions([{ ...image, engine: withKey }]))).toContain("unknown field 'engine.api_key'");
  });

  it('bounds an openai-compatible keep_alive_ms, its fallbacks\' too', () => {
    const chat = readCatalogFile('local-chat');
    const engine = { type: 'openai-compatible', base_url: 'https://api.example.com/v1', upstream_model: 'm-1', keep_alive_ms: 60_000 };
    expect(ModelCatalog.fromDefinitions([{ ...chat, engine }]).get('local-chat')?.engine).toEqual(engine);
    expect(loadError(() => ModelCatalog.fromDefinitions([{ ...chat, engine: { ...engine, keep_alive_ms: 0 } }]))).toContain('engine.keep_alive_ms must be an integer between 1 and 600000');
    const fallbacks = [{ base_url: 'https://other.example.com/v1', upstream_model: 'm-2', keep_alive_ms: 600_001 }];
    expect(loadError(() => ModelCatalog.fromDefinitions([{ ...chat, engine: { ...engine, fallbacks } }]))).toContain('engine.fallbacks[0].keep_alive_ms must be an integer between 1 and 600000');
  });

  it('fails clearly on a missing or empty directory', () => {
    expect(loadError(() => ModelCatalog.fromDirectory(path.join(os.tmpdir(), 'atelier-no-such-catalog')))).toContain(
      'Cannot read model catalog directory',
    );
    expect(loadError(() => ModelCatalog.fromDirectory(tmpCatalog({ 'README.md': '# notes' })))).toContain('contains no *.json');
  });
});
