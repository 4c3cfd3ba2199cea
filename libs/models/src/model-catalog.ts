import * as fs from 'node:fs';
import * as path from 'node:path';
import type { ValidateFunction } from 'ajv/dist/2020';
import { sharedAjv } from './ajv-factory';
import { ENDPOINT_CONTRACTS, RESERVED_PARAMETERS, supportsQueue } from './model-schema';
import {
  MODALITIES,
  MODEL_ENDPOINTS,
  type JsonSchemaObject,
  type ModelDefinition,
  type ModelFilter,
  type RenderType,
} from './model-types';
import { compileRequestValidator } from './model-validation';
import { formatAjvErrors } from './validation-messages';

/** fs errors can come from another realm (e.g. Jest's VM), where `instanceof Error` is false. */
function errorText(error: unknown): string {
  return typeof error === 'object' && error !== null && 'message' in error ? String(error.message) : String(error);
}

const CATALOG_SUBPATH = path.join('libs', 'models', 'catalog');

/**
 * Locates the versioned catalog. Walking up from this file works both from source (libs/models/src) and from
 * compiled output (dist/<app>/libs/models/src), where the nearest ancestor holding libs/models/catalog is
 * either a copy shipped next to the build or the repository itself.
 */
export function defaultCatalogDir(override?: string): string {
  if (override !== undefined && override !== '') return path.resolve(override);
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, CATALOG_SUBPATH);
    if (fs.statSync(candidate, { throwIfNoEntry: false })?.isDirectory()) return candidate;
    if (path.dirname(dir) === dir) break;
  }
  throw new Error(`Model catalog directory ${CATALOG_SUBPATH} not found above ${__dirname}; pass the directory explicitly`);
}

export class ModelCatalogError extends Error {
  constructor(
    readonly source: string,
    readonly problems: readonly string[],
  ) {
    super(`Invalid model definition in ${source}: ${problems.join('; ')}`);
    this.name = 'ModelCatalogError';
  }
}

const RENDER_TYPES: readonly RenderType[] = [
  'text',
  'textarea',
  'select',
  'slider',
  'number',
  'switch',
  'image',
  'video',
  'audio',
  'list',
  'json',
];

const nonEmptyString: JsonSchemaObject = { type: 'string', minLength: 1 };
const decimal: JsonSchemaObject = { type: 'string', format: 'decimal' };
const modalities: JsonSchemaObject = {
  type: 'array',
  minItems: 1,
  uniqueItems: true,
  items: { type: 'string', enum: [...MODALITIES] },
};

function pricing(method: string, fields: string[]): JsonSchemaObject {
  return {
    type: 'object',
    additionalProperties: false,
    required: ['method', ...fields],
    properties: { method: { const: method }, ...Object.fromEntries(fields.map((f) => [f, decimal])) },
  };
}

/** An openai-compatible server's idle-connection time (engine and fallbacks alike), at most 10 minutes. */
const keepAliveMs: JsonSchemaObject = { type: 'integer', minimum: 1, maximum: 600_000 };

function remoteEngine(type: string, extra: Record<string, JsonSchemaObject> = {}): JsonSchemaObject {
  return {
    type: 'object',
    additionalProperties: false,
    required: ['type', 'base_url', 'upstream_model'],
    properties: {
      type: { const: type },
      base_url: { type: 'string', pattern: '^https?://' },
      // Upper-case env var names only: a pasted key value ("sk-...") fails here instead of being committed.
      api_key_env: { type: 'string', pattern: '^[A-Z_][A-Z0-9_]*$' },
      upstream_model: nonEmptyString,
      timeout_ms: { type: 'integer', minimum: 1 },
      // The one upstream retry policy (libs/runtime's upstream-retry), for chat and media engines alike.
      max_retries: { type: 'integer', minimum: 0, maximum: 10 },
      retry_backoff_ms: { type: 'integer', minimum: 0, maximum: 60_000 },
      ...extra,
    },
  };
}

/** Other servers a chat engine tries in order (openai-compatible and anthropic alike). */
const chatFallbacks: JsonSchemaObject = {
  type: 'array',
  items: {
    type: 'object',
    additionalProperties: false,
    required: ['base_url', 'upstream_model'],
    properties: {
      base_url: { type: 'string', pattern: '^https?://' },
      upstream_model: nonEmptyString,
      api_key_env: { type: 'string', pattern: '^[A-Z_][A-Z0-9_]*$' },
      timeout_ms: { type: 'integer', minimum: 1 },
      keep_alive_ms: keepAliveMs,
    },
  },
};

/** Shape of one catalog file; cross-field rules that JSON Schema expresses poorly live in contractProblems. */
const DEFINITION_SCHEMA: JsonSchemaObject = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'created', 'owned_by', 'display_name', 'description', 'endpoint', 'capabilities', 'pricing', 'engine', 'parameters'],
  properties: {
    // Used as a URL path segment (GET /api/ai/models/:id), hence no slashes.
    id: { type: 'string', pattern: '^[a-z0-9][a-z0-9._-]{0,127}$' },
    // Other names clients call the model by (Claude Code's default model names, say): the same rules as ids.
    aliases: { type: 'array', maxItems: 32, uniqueItems: true, items: { type: 'string', pattern: '^[a-z0-9][a-z0-9._-]{0,127}$' } },
    batch_discount: { type: 'number', minimum: 0, maximum: 1 },
    created: { type: 'integer', minimum: 0 },
    owned_by: nonEmptyString,
    display_name: nonEmptyString,
    description: nonEmptyString,
    endpoint: { type: 'string', enum: [...MODEL_ENDPOINTS] },
    capabilities: {
      type: 'object',
      additionalProperties: false,
      required: ['input', 'output'],
      properties: { input: modalities, output: modalities },
    },
    pricing: {
      type: 'object',
      discriminator: { propertyName: 'method' },
      required: ['method'],
      oneOf: [
        // The output price is required of chat models (contractProblems); embeddings charge input tokens only.
        { ...pricing('token', ['input_cost_per_token', 'output_cost_per_token']), required: ['method', 'input_cost_per_token'] },
        pricing('per_image', ['cost_per_image']),
        pricing('per_video_output_second', ['cost_per_second']),
      ],
    },
    engine: {
      type: 'object',
      discriminator: { propertyName: 'type' },
      required: ['type'],
      oneOf: [
        {
          type: 'object',
          additionalProperties: false,
          required: ['type', 'name'],
          properties: { type: { const: 'builtin' }, name: nonEmptyString },
        },
        remoteEngine('openai-compatible', {
          keep_alive_ms: keepAliveMs,
          lora_base_model: nonEmptyString,
          responses_api: { type: 'boolean' },
          responses_tools: { type: 'array', items: { type: 'string', minLength: 1 }, uniqueItems: true },
          fallbacks: chatFallbacks,
        }),
        remoteEngine('anthropic', {
          version: nonEmptyString,
          keep_alive_ms: keepAliveMs,
          fallbacks: chatFallbacks,
        }),
        remoteEngine('openai-images'),
        remoteEngine('prediction', { version: nonEmptyString, style: { type: 'string', enum: ['replicate', 'fal'] } }),
      ],
    },
    context_window: { type: 'integer', minimum: 1 },
    default_max_tokens: { type: 'integer', minimum: 1 },
    dimensions: { type: 'integer', minimum: 1, maximum: 65_536 },
    supports_dimensions: { type: 'boolean' },
    max_batch: { type: 'integer', minimum: 1, maximum: 2048 },
    features: {
      type: 'object',
      additionalProperties: false,
      required: ['tools', 'json_mode', 'streaming'],
      properties: { tools: { type: 'boolean' }, json_mode: { type: 'boolean' }, streaming: { type: 'boolean' } },
    },
    parameters: {
      type: 'object',
      required: ['type', 'properties'],
      properties: {
        type: { const: 'object' },
        required: { type: 'array', uniqueItems: true, items: { type: 'string' } },
        // Every top-level parameter carries the UI hints, so forms can be generated from request_schema alone.
        properties: {
          type: 'object',
          additionalProperties: {
            type: 'object',
            required: ['title', 'x-order', 'basic', 'renderType'],
            properties: {
              title: nonEmptyString,
              'x-order': { type: 'integer', minimum: 0 },
              basic: { type: 'boolean' },
              renderType: { type: 'string', enum: [...RENDER_TYPES] },
            },
          },
        },
      },
    },
  },
  allOf: [
    {
      if: { required: ['endpoint'], properties: { endpoint: { const: '/chat/completions' } } },
      then: { required: ['context_window', 'default_max_tokens', 'features'] },
    },
    {
      if: { required: ['endpoint'], properties: { endpoint: { const: '/embeddings' } } },
      then: { required: ['context_window', 'dimensions'] },
    },
  ],
};

let definitionValidator: ValidateFunction<ModelDefinition> | undefined;

function checkShape(data: unknown, source: string): ModelDefinition {
  definitionValidator ??= sharedAjv().compile<ModelDefinition>(DEFINITION_SCHEMA);
  if (definitionValidator(data)) return data;
  const problems = formatAjvErrors(definitionValidator.errors ?? [], { requestBody: false, rootLabel: 'definition' });
  throw new ModelCatalogError(source, problems.map((issue) => issue.message));
}

function contractProblems(model: ModelDefinition): string[] {
  const problems: string[] = [];
  const contract = ENDPOINT_CONTRACTS[model.endpoint];
  const properties = model.parameters.properties ?? {};
  const required = model.parameters.required ?? [];

  if (model.pricing.method !== contract.pricing) {
    problems.push(`pricing.method '${model.pricing.method}' does not match endpoint ${model.endpoint} (expected '${contract.pricing}')`);
  }
  if (!model.capabilities.output.includes(contract.output)) {
    problems.push(`capabilities.output must include '${contract.output}' for endpoint ${model.endpoint}`);
  }
  for (const modality of contract.input) {
    if (!model.capabilities.input.includes(modality)) {
      problems.push(`capabilities.input must include '${modality}' for endpoint ${model.endpoint}`);
    }
  }
  for (const name of contract.requiredParameters) {
    if (!(name in properties)) problems.push(`parameters must define '${name}' (required by ${model.endpoint})`);
    else if (!required.includes(name)) problems.push(`parameters.required must include '${name}' (required by ${model.endpoint})`);
  }
  if (model.endpoint === '/videos/generate' && !('prompt' in properties) && !('multi_prompt' in properties)) {
    problems.push(`parameters must define 'prompt' or 'multi_prompt' (required by ${model.endpoint})`);
  }
  for (const name of RESERVED_PARAMETERS) {
    if (name in properties) problems.push(`parameters must not define '${name}' (reserved by the service)`);
  }
  for (const name of required) {
    if (!(name in properties)) problems.push(`parameters.required lists '${name}', which is not defined in parameters.properties`);
  }
  if (model.endpoint === '/chat/completions' && model.pricing.output_cost_per_token === undefined) {
    problems.push(`pricing.output_cost_per_token is required for endpoint ${model.endpoint}`);
  }
  if (model.endpoint === '/chat/completions' && model.default_max_tokens > model.context_window) {
    problems.push(`default_max_tokens (${model.default_max_tokens}) exceeds context_window (${model.context_window})`);
  }
  return problems;
}

/** Compiling here makes a broken parameters schema fail at startup rather than on the first request. */
function schemaProblems(model: ModelDefinition): string[] {
  try {
    compileRequestValidator(model, 'sync');
    if (supportsQueue(model)) compileRequestValidator(model, 'queue');
    return [];
  } catch (error) {
    return [`parameters is not a usable JSON Schema: ${errorText(error)}`];
  }
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

function parseDefinition(data: unknown, source: string): ModelDefinition {
  const model = checkShape(data, source);
  const problems = contractProblems(model);
  if (problems.length > 0) throw new ModelCatalogError(source, problems);
  // Frozen before compiling so the cached validator always matches the definition it was built from.
  deepFreeze(model);
  const invalid = schemaProblems(model);
  if (invalid.length > 0) throw new ModelCatalogError(source, invalid);
  return model;
}

/** The set of models the service offers, loaded once from versioned JSON files and read-only afterwards. */
export class ModelCatalog {
  private constructor(
    private readonly models: ReadonlyMap<string, ModelDefinition>,
    /** Each alias to the model it names. */
    private readonly aliases: ReadonlyMap<string, ModelDefinition> = new Map(),
  ) {}

  /** Loads every `*.json` file of the directory (default: the repository catalog). Throws ModelCatalogError on any bad file. */
  static fromDirectory(dir: string = defaultCatalogDir()): ModelCatalog {
    let files: string[];
    try {
      files = fs
        .readdirSync(dir, { withFileTypes: true })
        .filter((entry) => entry.isFile() && entry.name.endsWith('.json'))
        .map((entry) => entry.name)
        .sort();
    } catch (error) {
      throw new Error(`Cannot read model catalog directory ${dir}: ${errorText(error)}`);
    }
    if (files.length === 0) throw new Error(`Model catalog directory ${dir} contains no *.json model definitions`);

    return ModelCatalog.build(
      files.map((name) => {
        const file = path.join(dir, name);
        let data: unknown;
        try {
          data = JSON.parse(fs.readFileSync(file, 'utf8'));
        } catch (error) {
          throw new ModelCatalogError(file, [`not valid JSON: ${errorText(error)}`]);
        }
        return { source: file, data };
      }),
    );
  }

  /** Builds a catalog from in-memory definitions (tests, generated catalogs); validated like files. */
  static fromDefinitions(definitions: readonly unknown[]): ModelCatalog {
    return ModelCatalog.build(
      definitions.map((data, index) => ({ source: `definitions[${index}]`, data: structuredClone(data) })),
    );
  }

  private static build(entries: ReadonlyArray<{ source: string; data: unknown }>): ModelCatalog {
    const models = new Map<string, ModelDefinition>();
    const sources = new Map<string, string>();
    for (const { source, data } of entries) {
      const model = parseDefinition(data, source);
      const previous = sources.get(model.id);
      if (previous !== undefined) {
        throw new ModelCatalogError(source, [`duplicate model id '${model.id}' (already defined in ${previous})`]);
      }
      sources.set(model.id, source);
      models.set(model.id, model);
    }
    const aliases = new Map<string, ModelDefinition>();
    for (const model of models.values())
      for (const alias of model.aliases ?? []) {
        const taken = models.has(alias) ? `the id of a model` : aliases.has(alias) ? `an alias of ${aliases.get(alias)!.id}` : undefined;
        if (taken) throw new ModelCatalogError(sources.get(model.id)!, [`alias '${alias}' is already ${taken}`]);
        aliases.set(alias, model);
      }
    // Ordered by id so listings do not depend on how file names happen to sort.
    return new ModelCatalog(new Map([...models].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))), aliases);
  }

  /** The model with this id, or the one this alias names. */
  get(id: string): ModelDefinition | undefined {
    return this.models.get(id) ?? this.aliases.get(id);
  }

  has(id: string): boolean {
    return this.models.has(id) || this.aliases.has(id);
  }

  /** Every alias with the model it names, ordered by alias. */
  aliasList(): [string, ModelDefinition][] {
    return [...this.aliases].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  }

  /** Models ordered by id, optionally narrowed; all given criteria must hold. */
  list(filter: ModelFilter = {}): ModelDefinition[] {
    return [...this.models.values()].filter(
      (model) =>
        (filter.endpoint === undefined || model.endpoint === filter.endpoint) &&
        (filter.input === undefined || model.capabilities.input.includes(filter.input)) &&
        (filter.output === undefined || model.capabilities.output.includes(filter.output)),
    );
  }
}
