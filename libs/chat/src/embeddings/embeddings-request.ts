import { validateModelRequest, type EmbeddingModelDefinition, type ModelCatalog } from '@atelier/models';
import { invalid, resolveEndpointModel } from '../chat-request';
import { countTextTokens } from '../token-count';

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
  const model = resolveEndpointModel(catalog, raw, '/embeddings', 'an embedding model');
  const result = validateModelRequest(model, raw, { inPlace: true });
  if (!result.ok) throw invalid(result.errors);
  const body = result.value;
  const input = body.input as string | string[] | number[] | number[][];
  const inputs: string[] | number[][] =
    typeof input === 'string' ? [input] : input.length > 0 && typeof input[0] === 'number' ? [input as number[]] : (input as string[] | number[][]);
  let tokens = 0;
  inputs.forEach((item, i) => {
    const field = typeof input === 'string' ? 'input' : `input[${i}]`;
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
