import { ApiError } from '@atelier/contracts';
import { validateModelRequest, type MediaModelDefinition, type ModelCatalog, type ModelEndpoint, type RequestMode } from '@atelier/models';

const KIND: Readonly<Record<ModelEndpoint, string>> = {
  '/chat/completions': 'a chat model',
  '/images/generate': 'an image generation model',
  '/images/edit': 'an image editing model',
  '/videos/generate': 'a video model',
  '/embeddings': 'an embedding model',
};

/** The spec words these two as pydantic did: the endpoint answers them as 422 with this prefix. */
const VALUE_ERRORS = new Set(["Cannot provide both 'prompt' and 'multi_prompt'.", "Either 'prompt' or 'multi_prompt' must be provided."]);

/**
 * The model a media endpoint was asked to run: missing -> 400, unknown -> 404
 * `Model not found: <name>`, a model of another kind -> 400 naming the endpoint that serves it.
 */
export function resolveMediaModel(catalog: ModelCatalog, body: unknown, endpoint: ModelEndpoint): MediaModelDefinition {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw ApiError.badRequest('Request body must be a JSON object');
  const name = (body as Record<string, unknown>).model;
  if (name === undefined || name === null || name === '') throw ApiError.badRequest('You must specify a model to call');
  if (typeof name !== 'string') throw ApiError.badRequest('model must be a string');
  const model = catalog.get(name);
  if (!model) throw new ApiError('resource_not_found', `Model not found: ${name}`);
  if (model.endpoint !== endpoint)
    throw ApiError.badRequest(`Model ${model.id} is ${KIND[model.endpoint]} and cannot be used with POST /api/ai${endpoint}; use POST /api/ai${model.endpoint}`, {
      endpoint: `/api/ai${model.endpoint}`,
    });
  return model as MediaModelDefinition;
}

/**
 * Validates a body against the model's json_request_schema. A violation is a 400 naming each
 * bad parameter and what it accepts; the video prompt/multi_prompt rule is a 422 worded
 * `422 - Value error, ...` as the spec requires. Returns a copy with defaults filled in.
 */
export function validateMediaParams(model: MediaModelDefinition, body: unknown, mode: RequestMode = 'sync'): Record<string, unknown> {
  const result = validateModelRequest(model, body, { mode });
  if (result.ok) return result.value;
  const valueError = result.errors.find((e) => e.field === '' && VALUE_ERRORS.has(e.message));
  if (valueError) throw new ApiError('unprocessable_entity', `422 - Value error, ${valueError.message}`);
  throw ApiError.badRequest(result.errors.map((e) => e.message).join('; '), { fields: result.errors });
}
