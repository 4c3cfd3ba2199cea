import { GENERATION_PRIORITIES } from '@atelier/contracts';
import type {
  ChatModelDefinition,
  EmbeddingModelDefinition,
  JsonSchema,
  JsonSchemaObject,
  Modality,
  ModelDefinition,
  ModelEndpoint,
  PricingMethod,
  RequestMode,
} from './model-types';

export const JSON_SCHEMA_DIALECT = 'https://json-schema.org/draft/2020-12/schema';

/** What every model served by an endpoint must satisfy; checked when the catalog loads. */
export interface EndpointContract {
  pricing: PricingMethod;
  /** Modality the endpoint returns; the model's capabilities.output must include it. */
  output: Modality;
  /** Modalities the endpoint always sends; the model's capabilities.input must include them. */
  input: Modality[];
  /** Parameters the endpoint requires, so every model must define them and list them as required. */
  requiredParameters: string[];
  /** Whether POST /api/ai/queue accepts models of this endpoint. */
  queueable: boolean;
}

export const ENDPOINT_CONTRACTS: Readonly<Record<ModelEndpoint, EndpointContract>> = {
  '/chat/completions': { pricing: 'token', output: 'text', input: ['text'], requiredParameters: [], queueable: false },
  '/images/generate': { pricing: 'per_image', output: 'image', input: ['text'], requiredParameters: ['prompt'], queueable: true },
  '/images/edit': {
    pricing: 'per_image',
    output: 'image',
    input: ['text', 'image'],
    requiredParameters: ['prompt', 'input_image'],
    queueable: true,
  },
  '/videos/generate': { pricing: 'per_video_output_second', output: 'video', input: ['text'], requiredParameters: [], queueable: true },
  '/embeddings': { pricing: 'token', output: 'embedding', input: ['text'], requiredParameters: [], queueable: false },
};

/** Body fields the service itself interprets; a model may not redefine them. */
export const RESERVED_PARAMETERS: readonly string[] = ['model', 'num_generations', 'target_repo', 'target_directory', 'priority'];

export function supportsQueue(model: ModelDefinition): boolean {
  return ENDPOINT_CONTRACTS[model.endpoint].queueable;
}

/** The model-specific parameters with UI hints, exactly as stored in the catalog (a copy). */
export function buildRequestSchema(model: ModelDefinition): JsonSchemaObject {
  return structuredClone(model.parameters);
}

const rejected = (message: string): JsonSchemaObject => ({ not: {}, 'x-error-message': message });

const textPart: JsonSchemaObject = {
  type: 'object',
  required: ['type', 'text'],
  properties: { type: { const: 'text' }, text: { type: 'string' } },
};

function mediaPart(type: string, key: string): JsonSchemaObject {
  return {
    type: 'object',
    required: ['type', key],
    properties: {
      type: { const: type },
      [key]: {
        type: 'object',
        required: ['url'],
        properties: {
          url: { type: 'string', format: 'media-url' },
          detail: { type: 'string', enum: ['auto', 'low', 'high'] },
        },
      },
    },
  };
}

const audioPart: JsonSchemaObject = {
  type: 'object',
  required: ['type', 'input_audio'],
  properties: {
    type: { const: 'input_audio' },
    input_audio: {
      type: 'object',
      required: ['data', 'format'],
      properties: { data: { type: 'string', minLength: 1 }, format: { type: 'string', enum: ['wav', 'mp3'] } },
    },
  },
};

const textContent: JsonSchemaObject = {
  anyOf: [{ type: 'string' }, { type: 'array', minItems: 1, items: textPart }],
};

/** Content parts are limited to the modalities the model accepts, so e.g. a video part fails validation up front. */
function userContent(input: readonly Modality[]): JsonSchemaObject {
  const parts: JsonSchemaObject[] = [textPart];
  if (input.includes('image')) parts.push(mediaPart('image_url', 'image_url'));
  if (input.includes('video')) parts.push(mediaPart('video_url', 'video_url'));
  if (input.includes('audio')) parts.push(audioPart);
  return {
    anyOf: [
      { type: 'string' },
      {
        type: 'array',
        minItems: 1,
        items: { type: 'object', discriminator: { propertyName: 'type' }, required: ['type'], oneOf: parts },
      },
    ],
  };
}

const toolCall: JsonSchemaObject = {
  type: 'object',
  required: ['id', 'type', 'function'],
  properties: {
    id: { type: 'string' },
    type: { const: 'function' },
    function: {
      type: 'object',
      required: ['name', 'arguments'],
      properties: { name: { type: 'string' }, arguments: { type: 'string' } },
    },
  },
};

function chatMessage(model: ChatModelDefinition): JsonSchemaObject {
  const simple = (
    role: string,
    content: JsonSchemaObject,
    extra: Record<string, JsonSchema> = {},
    required: string[] = [],
  ): JsonSchemaObject => ({
    type: 'object',
    required: ['role', 'content', ...required],
    properties: { role: { const: role }, content, name: { type: 'string' }, ...extra },
  });
  return {
    type: 'object',
    discriminator: { propertyName: 'role' },
    required: ['role'],
    oneOf: [
      simple('system', textContent),
      simple('developer', textContent),
      simple('user', userContent(model.capabilities.input)),
      {
        type: 'object',
        required: ['role'],
        properties: {
          role: { const: 'assistant' },
          // null when the turn only carried tool calls
          content: { anyOf: [{ type: 'string' }, { type: 'null' }, { type: 'array', items: textPart }] },
          name: { type: 'string' },
          refusal: { type: ['string', 'null'] },
          tool_calls: { type: 'array', items: toolCall },
        },
      },
      simple('tool', textContent, { tool_call_id: { type: 'string', minLength: 1 } }, ['tool_call_id']),
    ],
  };
}

const tool: JsonSchemaObject = {
  type: 'object',
  required: ['type', 'function'],
  properties: {
    type: { const: 'function' },
    function: {
      type: 'object',
      required: ['name'],
      properties: {
        name: { type: 'string', pattern: '^[a-zA-Z0-9_-]{1,64}$' },
        description: { type: 'string' },
        parameters: { type: 'object' },
        strict: { type: ['boolean', 'null'] },
      },
    },
  },
};

const toolChoice: JsonSchemaObject = {
  anyOf: [
    { type: 'string', enum: ['none', 'auto', 'required'] },
    {
      type: 'object',
      required: ['type', 'function'],
      properties: {
        type: { const: 'function' },
        function: { type: 'object', required: ['name'], properties: { name: { type: 'string' } } },
      },
    },
  ],
};

function responseFormat(jsonMode: boolean): JsonSchemaObject {
  const text: JsonSchemaObject = { type: 'object', required: ['type'], properties: { type: { const: 'text' } } };
  // Without JSON mode only the plain-text format remains, which reads as "response_format.type must be 'text'".
  if (!jsonMode) return text;
  return {
    type: 'object',
    discriminator: { propertyName: 'type' },
    required: ['type'],
    oneOf: [
      text,
      { type: 'object', required: ['type'], properties: { type: { const: 'json_object' } } },
      {
        type: 'object',
        required: ['type', 'json_schema'],
        properties: {
          type: { const: 'json_schema' },
          json_schema: {
            type: 'object',
            required: ['name'],
            properties: {
              name: { type: 'string', pattern: '^[a-zA-Z0-9_-]{1,64}$' },
              description: { type: 'string' },
              schema: { type: 'object' },
              strict: { type: ['boolean', 'null'] },
            },
          },
        },
      },
    ],
  };
}

function chatCommonProperties(model: ChatModelDefinition): Record<string, JsonSchema> {
  const tokenLimit: JsonSchemaObject = { type: 'integer', minimum: 1, maximum: model.context_window };
  const { tools, json_mode, streaming } = model.features;
  const noTools = `tools are not supported by model ${model.id}`;
  return {
    messages: { type: 'array', minItems: 1, items: chatMessage(model) },
    stream: streaming
      ? { type: 'boolean', default: false }
      : { type: 'boolean', const: false, 'x-error-message': `streaming is not supported by model ${model.id}` },
    stream_options: { type: 'object', properties: { include_usage: { type: 'boolean' } } },
    max_tokens: tokenLimit,
    max_completion_tokens: tokenLimit,
    temperature: { type: 'number', minimum: 0, maximum: 2 },
    top_p: { type: 'number', minimum: 0, maximum: 1 },
    frequency_penalty: { type: 'number', minimum: -2, maximum: 2 },
    presence_penalty: { type: 'number', minimum: -2, maximum: 2 },
    stop: { anyOf: [{ type: 'string' }, { type: 'array', maxItems: 4, items: { type: 'string' } }] },
    seed: { type: 'integer' },
    tools: tools ? { type: 'array', items: tool } : rejected(noTools),
    tool_choice: tools ? toolChoice : rejected(noTools),
    parallel_tool_calls: tools ? { type: 'boolean' } : rejected(noTools),
    response_format: responseFormat(json_mode),
  };
}

/** Most inputs one embeddings request may carry (OpenAI's limit). */
export const MAX_EMBEDDING_INPUTS = 2048;

function embeddingCommonProperties(model: EmbeddingModelDefinition): Record<string, JsonSchema> {
  const tokens: JsonSchemaObject = { type: 'array', minItems: 1, items: { type: 'integer', minimum: 0 } };
  const inputMessage = `input must be a string, an array of at most ${MAX_EMBEDDING_INPUTS} strings, an array of token ids, or an array of at most ${MAX_EMBEDDING_INPUTS} arrays of token ids`;
  return {
    input: {
      anyOf: [
        { type: 'string' },
        { type: 'array', minItems: 1, maxItems: MAX_EMBEDDING_INPUTS, items: { type: 'string' } },
        tokens,
        { type: 'array', minItems: 1, maxItems: MAX_EMBEDDING_INPUTS, items: tokens },
      ],
      'x-error-message': inputMessage,
    },
    encoding_format: { type: 'string', enum: ['float', 'base64'], default: 'float' },
    dimensions: model.supports_dimensions
      ? { type: 'integer', minimum: 1, maximum: model.dimensions }
      : { type: 'integer', const: model.dimensions, 'x-error-message': `dimensions cannot be changed for model ${model.id}: its vectors have ${model.dimensions}` },
    user: { type: 'string' },
    target_namespace: { type: 'string', minLength: 1 },
  };
}

function mediaCommonProperties(mode: RequestMode): Record<string, JsonSchema> {
  const common: Record<string, JsonSchema> = {
    response_format: { type: 'string', enum: ['url', 'b64_json'], default: 'url' },
    target_namespace: { type: 'string', minLength: 1 },
  };
  if (mode === 'queue') {
    common.num_generations = { type: 'integer', minimum: 1, maximum: 4, default: 1 };
    common.target_repo = { type: 'string', minLength: 1 };
    common.target_directory = { type: 'string' };
    common.priority = {
      type: 'string',
      enum: [...GENERATION_PRIORITIES],
      default: 'normal',
      description: "Orders the namespace's own queued generations; never its place against other namespaces",
    };
  }
  return common;
}

/** Spec rule for video: exactly one of prompt / multi_prompt (only when the model offers both). */
function videoPromptRules(model: ModelDefinition): { required: string[]; allOf: JsonSchemaObject[] } {
  if (model.endpoint !== '/videos/generate') return { required: [], allOf: [] };
  const properties = model.parameters.properties ?? {};
  const hasPrompt = 'prompt' in properties;
  const hasMulti = 'multi_prompt' in properties;
  if (hasPrompt && hasMulti) {
    return {
      required: [],
      allOf: [
        { not: { required: ['prompt', 'multi_prompt'] }, 'x-error-message': "Cannot provide both 'prompt' and 'multi_prompt'." },
        {
          anyOf: [{ required: ['prompt'] }, { required: ['multi_prompt'] }],
          'x-error-message': "Either 'prompt' or 'multi_prompt' must be provided.",
        },
      ],
    };
  }
  return { required: hasPrompt ? ['prompt'] : hasMulti ? ['multi_prompt'] : [], allOf: [] };
}

function order(schema: JsonSchema): number {
  return typeof schema === 'object' && typeof schema['x-order'] === 'number' ? schema['x-order'] : Number.MAX_SAFE_INTEGER;
}

/**
 * Endpoint fields and model parameters are merged per property. When both define a property the model's
 * definition stays on top (so its default and UI hints apply) and the endpoint's definition is added under
 * allOf, so a model can narrow what the endpoint accepts but never widen it (e.g. temperature stays 0-2).
 */
function mergeProperties(common: Record<string, JsonSchema>, own: Record<string, JsonSchema>): Record<string, JsonSchema> {
  const merged: Record<string, JsonSchema> = {};
  const ownNames = Object.keys(own).sort((a, b) => order(own[a]) - order(own[b]));
  for (const name of ownNames) {
    const mine = own[name];
    const theirs = common[name];
    if (theirs === undefined || typeof mine !== 'object') merged[name] = mine;
    else merged[name] = { ...mine, allOf: [...(mine.allOf ?? []), theirs] };
  }
  for (const [name, schema] of Object.entries(common)) {
    if (!(name in merged)) merged[name] = schema;
  }
  return merged;
}

/**
 * The complete JSON Schema of the request body the model's endpoint accepts (`mode: 'sync'`), or of the
 * POST /api/ai/queue body for the model (`mode: 'queue'`). Media bodies reject unknown parameters; chat
 * bodies allow them because OpenAI SDKs send fields such as `user`, `n` or `metadata`.
 */
export function buildJsonRequestSchema(model: ModelDefinition, mode: RequestMode = 'sync'): JsonSchemaObject {
  if (mode === 'queue' && !supportsQueue(model)) {
    throw new Error(`model ${model.id} (${model.endpoint}) cannot be used with the queue`);
  }
  const contract = ENDPOINT_CONTRACTS[model.endpoint];
  const isChat = model.endpoint === '/chat/completions';
  const isEmbedding = model.endpoint === '/embeddings';
  const common = isChat ? chatCommonProperties(model) : isEmbedding ? embeddingCommonProperties(model) : mediaCommonProperties(mode);
  const rules = videoPromptRules(model);
  const required = [
    ...new Set(['model', ...(isChat ? ['messages'] : []), ...(isEmbedding ? ['input'] : []), ...contract.requiredParameters, ...rules.required, ...(model.parameters.required ?? [])]),
  ];

  const schema: JsonSchemaObject = {
    $schema: JSON_SCHEMA_DIALECT,
    title: `${model.display_name} ${mode === 'queue' ? 'queue' : model.endpoint} request`,
    type: 'object',
    required,
    properties: {
      model: { type: 'string', const: model.id, title: 'Model', description: 'Model id' },
      ...mergeProperties(common, model.parameters.properties ?? {}),
    },
  };
  // Chat and embeddings bodies take fields OpenAI SDKs add before every gateway knows them.
  if (!isChat && !isEmbedding) schema.additionalProperties = false;
  if (rules.allOf.length > 0) schema.allOf = rules.allOf;
  // Parameters may $ref their own "#/$defs/..."; keep those resolvable at the new root.
  if (model.parameters.$defs !== undefined) schema.$defs = model.parameters.$defs;
  // The schema shares building blocks with the catalog and this module; callers get their own copy to mutate.
  return structuredClone(schema);
}
