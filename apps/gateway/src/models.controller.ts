import { Controller, Get, Inject, Param, Query } from '@nestjs/common';
import { ApiError } from '@atelier/contracts';
import { ModelCatalog, toPublicModel, type ModelDefinition, type ModelEndpoint, type Modality, type PublicModel } from '@atelier/models';
import { RequiresScope } from '@atelier/auth';

const ENDPOINTS: readonly string[] = ['/chat/completions', '/images/generate', '/images/edit', '/videos/generate'];
const MODALITIES: readonly string[] = ['text', 'image', 'video', 'audio'];

@Controller('api/ai/models')
@RequiresScope('models')
export class ModelsController {
  /** The catalog is immutable after load, so each public object (schemas included) is built once. */
  private readonly publicModels = new Map<string, PublicModel>();

  constructor(@Inject(ModelCatalog) private readonly catalog: ModelCatalog) {}

  private toPublic(model: ModelDefinition): PublicModel {
    let cached = this.publicModels.get(model.id);
    if (!cached) {
      cached = toPublicModel(model);
      this.publicModels.set(model.id, cached);
    }
    return cached;
  }

  /** OpenAI-style list; filters accept `endpoint` (with or without leading slash) and modalities. */
  @Get()
  list(@Query() query: Record<string, unknown>) {
    const endpoint = optionalString(query, 'endpoint');
    const input = optionalString(query, 'input');
    const output = optionalString(query, 'output');
    const normalized = endpoint && (endpoint.startsWith('/') ? endpoint : `/${endpoint}`);
    if (normalized && !ENDPOINTS.includes(normalized))
      throw ApiError.badRequest(`endpoint must be one of ${ENDPOINTS.join(', ')}`);
    for (const [name, value] of [['input', input], ['output', output]] as const)
      if (value && !MODALITIES.includes(value)) throw ApiError.badRequest(`${name} must be one of ${MODALITIES.join(', ')}`);
    const data = this.catalog
      .list({ endpoint: normalized as ModelEndpoint | undefined, input: input as Modality | undefined, output: output as Modality | undefined })
      .map((m) => this.toPublic(m));
    return { object: 'list', data };
  }

  @Get(':id')
  get(@Param('id') id: string) {
    const model = this.catalog.get(id);
    if (!model) throw new ApiError('resource_not_found', `Model not found: ${id}`);
    return this.toPublic(model);
  }
}

function optionalString(query: Record<string, unknown>, name: string): string | undefined {
  const value = query[name];
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string') throw ApiError.badRequest(`${name} must be given once`);
  return value;
}
