import { ApiError } from '@atelier/contracts';
import { validateModelRequest, type EmbeddingModelDefinition, type ModelCatalog, type ValidationIssue } from '@atelier/models';
import { countTextTokens } from '../token-count';

const USE_INSTEAD: Readonly<Record<string, string>> = {
  '/chat/completions': 'POST /api/ai/chat/completions',
  '/images/generate': 'POST /api/ai/images/generate',
  '/images/edit': 'POST /api/ai/images/edit',
  '/videos/generate': 'POST /api/ai/videos/generate',
};

function invalid(issues: { field: string; message: string }[]): ApiError {
  return ApiError.badRequest(issues.map((i) => i.message).join('; '), { fields: issues.map(({ field, message }) => ({ field, message })) });
}

export interface EmbeddingsRequest {
  model: EmbeddingModelDefinition;
  body: Record<string, unknown>;
  /** Always a list: one string input becomes one item. */
  inputs: string[] | number[][];
  /** o200k tokens of all inputs (token id inputs count their ids): what is reserved and rate-limited. */
  tokens: number;
  encoding: 'float' | 'base64';
  dimensions?: number;
}

/**
 * Validates an embeddings body for its model (the model's json_request_schema: input shapes and
 * at most MAX_EMBEDDING_INPUTS items, encoding_format, dimensions), then each input's tokens
 * against the model's context window.
 */
export function parseEmbeddingsRequest(catalog: ModelCatalog, raw: unknown): EmbeddingsRequest {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw ApiError.badRequest('Request body must be a JSON object');
  const name = (raw as Record<string, unknown>).model;
  if (name === undefined || name === null || name === '') throw invalid([{ field: 'model', message: 'You must specify a model to call' }]);
  if (typeof name !== 'string') throw invalid([{ field: 'model', message: 'model must be a string' }]);
  const model = catalog.get(name);
  if (!model) throw new ApiError('resource_not_found', `Model not found: ${name}`);
  if (model.endpoint !== '/embeddings')
    throw invalid([{ field: 'model', message: `Model ${name} is not an embedding model; use ${USE_INSTEAD[model.endpoint] ?? model.endpoint} for it` }]);
  const result = validateModelRequest(model, raw, { inPlace: true });
  if (!result.ok) throw invalid(result.errors as ValidationIssue[]);
  const body = result.value;
  const input = body.input as string | string[] | number[] | number[][];
  const inputs: string[] | number[][] =
    typeof input === 'string' ? [input] : input.length > 0 && typeof input[0] === 'number' ? [input as number[]] : (input as string[] | number[][]);
  let tokens = 0;
  inputs.forEach((item, i) => {
    const field = inputs.length === 1 && !Array.isArray(input[0]) && typeof input !== 'object' ? 'input' : `input[${i}]`;
    if (typeof item === 'string' && item.length === 0) throw invalid([{ field, message: `${field} is empty: every input needs text to embed` }]);
    // Counted only as far as the window: past it the request is refused whatever the rest holds.
    const count = typeof item === 'string' ? countTextTokens(item, model.context_window) : item.length;
    if (count > model.context_window)
      throw invalid([{ field, message: `${field} is longer than the ${model.context_window} tokens model ${model.id} takes per input` }]);
    tokens += count;
  });
  const dimensions = body.dimensions as number | undefined;
  return { model, body, inputs, tokens, encoding: body.encoding_format === 'base64' ? 'base64' : 'float', ...(dimensions !== undefined && { dimensions }) };
}
