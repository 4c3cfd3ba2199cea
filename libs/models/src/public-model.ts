import { buildJsonRequestSchema, buildRequestSchema } from './model-schema';
import type { ModelDefinition, Pricing, PublicModel } from './model-types';

/** Listed field by field so that nothing added to the stored pricing later leaks into the public object. */
function publicPricing(pricing: Pricing): Pricing {
  switch (pricing.method) {
    case 'token':
      return {
        method: 'token',
        input_cost_per_token: pricing.input_cost_per_token,
        output_cost_per_token: pricing.output_cost_per_token,
      };
    case 'per_image':
      return { method: 'per_image', cost_per_image: pricing.cost_per_image };
    case 'per_video_output_second':
      return { method: 'per_video_output_second', cost_per_second: pricing.cost_per_second };
  }
}

/**
 * The model object served by GET /api/ai/models/:id. Built from an allow-list: the engine (upstream URLs,
 * API key env var names, upstream model names) is deliberately absent.
 */
export function toPublicModel(model: ModelDefinition): PublicModel {
  return {
    id: model.id,
    object: 'model',
    created: model.created,
    owned_by: model.owned_by,
    display_name: model.display_name,
    description: model.description,
    endpoint: model.endpoint,
    capabilities: { input: [...model.capabilities.input], output: [...model.capabilities.output] },
    pricing: publicPricing(model.pricing),
    request_schema: buildRequestSchema(model),
    json_request_schema: buildJsonRequestSchema(model, 'sync'),
  };
}
