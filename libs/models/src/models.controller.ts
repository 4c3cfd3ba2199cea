import { Controller, Get, Header, Inject, Param, Query } from '@nestjs/common';
import { ApiError } from '@atelier/contracts';
import { ModelCatalog } from './model-catalog';
import { MODALITIES, MODEL_ENDPOINTS, type ModelDefinition, type ModelEndpoint, type Modality, type PublicModel } from './model-types';
import { toPublicModel } from './public-model';
import { CurrentCaller, NamespaceAccess, RequiresScope, type Caller } from '@atelier/auth';
import { DeployedModels, deployedDefinition, deployedModelObject } from './deployed-models.service';

/** What Fastify sends with an object; a serialized answer is a string, which it would call text/plain. */
const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

@Controller('api/ai/models')
@RequiresScope('models')
export class ModelsController {
  /** The catalog is immutable after load, so each public object (schemas included) is built once. */
  private readonly publicModels = new Map<string, PublicModel>();
  /**
   * And each answer is serialized once, per model and per list filter (a few hundred at most):
   * a model object carries its request schemas, and serializing it again took a fifth of the
   * gateway's CPU per GET (48 of 218 us in its CPU profile under bench:chat).
   */
  private readonly answers = new Map<string, string>();

  constructor(
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
    private readonly deployed: DeployedModels,
    private readonly access: NamespaceAccess,
  ) {}

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
  @Header('content-type', JSON_CONTENT_TYPE)
  async list(@CurrentCaller() caller: Caller, @Query() query: Record<string, unknown>): Promise<string> {
    const endpoint = optionalString(query, 'endpoint');
    const input = optionalString(query, 'input');
    const output = optionalString(query, 'output');
    const normalized = endpoint && (endpoint.startsWith('/') ? endpoint : `/${endpoint}`);
    if (normalized && !(MODEL_ENDPOINTS as readonly string[]).includes(normalized))
      throw ApiError.badRequest(`endpoint must be one of ${(MODEL_ENDPOINTS as readonly string[]).join(', ')}`);
    for (const [name, value] of [['input', input], ['output', output]] as const)
      if (value && !(MODALITIES as readonly string[]).includes(value)) throw ApiError.badRequest(`${name} must be one of ${MODALITIES.join(', ')}`);
    const catalog = this.answer(`list ${normalized ?? ''} ${input ?? ''} ${output ?? ''}`, () => {
      const data = this.catalog
        .list({ endpoint: normalized as ModelEndpoint | undefined, input: input as Modality | undefined, output: output as Modality | undefined })
        .map((m) => this.toPublic(m));
      return { object: 'list', data };
    });
    // The caller's deployed fine-tunes follow the catalog's models, by the same filters.
    const own = (await this.deployed.visibleTo(caller))
      .map((v) => ({ view: v, model: deployedDefinition(v) }))
      .filter(({ model }) => (!normalized || model.endpoint === normalized) && (!input || model.capabilities.input.includes(input as Modality)) && (!output || model.capabilities.output.includes(output as Modality)));
    if (own.length === 0) return catalog;
    const extra = own.map(({ view }) => JSON.stringify(deployedModelObject(view)));
    return `${catalog.slice(0, -2)}${catalog.endsWith('[]}') ? '' : ','}${extra.join(',')}]}`;
  }

  @Get(':id')
  @Header('content-type', JSON_CONTENT_TYPE)
  async get(@CurrentCaller() caller: Caller, @Param('id') id: string): Promise<string> {
    const model = this.catalog.get(id);
    if (model) return this.answer(`model ${model.id}`, () => this.toPublic(model));
    // Not in the catalog: a deployed fine-tune the caller may call, or the same 404.
    const view = await this.deployed.resolve(caller, id, (ns) => this.access.canAccess(caller, ns));
    if (!view) throw new ApiError('resource_not_found', `Model not found: ${id}`);
    return JSON.stringify(deployedModelObject(view));
  }

  private answer(key: string, build: () => unknown): string {
    let text = this.answers.get(key);
    if (text === undefined) {
      text = JSON.stringify(build());
      this.answers.set(key, text);
    }
    return text;
  }
}

function optionalString(query: Record<string, unknown>, name: string): string | undefined {
  const value = query[name];
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string') throw ApiError.badRequest(`${name} must be given once`);
  return value;
}
