import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { NamespaceAccess, type Caller } from '@atelier/auth';
import { chargeTags, CreditLedger, PaidRequests, reservationReference } from '@atelier/billing';
import { ApiError, UUID_PATTERN } from '@atelier/contracts';
import { requestedUsage, usageCost } from '@atelier/media';
import { DeployedModels, deployedDefinition, ModelCatalog, validateModelRequest, type MediaModelDefinition, type ModelDefinition } from '@atelier/models';
import { Metrics } from '@atelier/observability';
import { uuidV7 } from '@atelier/random';
import { ConcurrencyLimiter } from '@atelier/runtime';
import { GenerationDispatcher } from './generation-dispatcher';
import { RECORD_FIELDS } from './generation-record';
import { GenerationsRepository } from './generations.repository';
import { optionalText } from './query-text';
import { QUEUE_PRIORITIES, type QueuePriority } from './queue-positions';
import { modelParams, parseWebhookRequest } from './webhook-request';

const CONTROL_FIELDS = new Set(['model', 'num_generations', 'target_namespace', 'target_repo', 'target_directory', 'priority']);

export function mediaTypeOf(model: ModelDefinition): 'image' | 'video' | undefined {
  if (model.capabilities.output.includes('video')) return 'video';
  if (model.capabilities.output.includes('image')) return 'image';
  return undefined;
}

/** POST /api/ai/queue: validate, reserve all n or none, write the rows, hand them to the workers. */
@Injectable()
export class EnqueueGenerations implements OnModuleInit {
  constructor(
    private readonly generations: GenerationsRepository,
    private readonly dispatcher: GenerationDispatcher,
    private readonly ledger: CreditLedger,
    private readonly paid: PaidRequests,
    private readonly access: NamespaceAccess,
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
    private readonly metrics: Metrics,
    private readonly slots: ConcurrencyLimiter,
    private readonly deployedModels: DeployedModels,
  ) {}

  /**
   * A generation holds its max_concurrent slot until it ends; should the release be lost, a
   * full limit checks its generations' real state before refusing anyone.
   */
  onModuleInit(): void {
    const prefix = reservationReference('generation', '');
    this.slots.setActiveCheck(prefix, async (members) => {
      const ids = members.map((m) => m.slice(prefix.length)).filter((id) => UUID_PATTERN.test(id));
      const active = await this.generations.active(ids);
      return new Set([...active].map((id) => prefix + id));
    });
  }

  /**
   * Validates only what the spec checks at enqueue; model parameters are checked when the
   * generation runs. Credits are reserved first, all n or none, then the rows are written; the
   * jobs (jobId = generation id) follow, and the dispatcher re-adds any job lost to a crash.
   */
  async enqueue(caller: Caller, rawBody: unknown): Promise<{ generations: { generation_id: string; status: 'queued' }[] }> {
    const validating = this.metrics.stage('queue.validate');
    if (rawBody === null || typeof rawBody !== 'object' || Array.isArray(rawBody)) throw ApiError.badRequest('Request body must be a JSON object');
    const body = rawBody as Record<string, unknown>;
    const scope = await this.access.resolve(caller, body.target_namespace);
    if (typeof body.model !== 'string' || body.model === '') throw ApiError.badRequest('You must specify a model to call');
    // A catalog model, or a deployed atelier/local-image fine-tune the caller may call.
    const model = this.catalog.get(body.model) ?? (await this.deployedImageModel(scope.id, body.model));
    if (!model) throw new ApiError('resource_not_found', `Model not found: ${body.model}`);
    const mediaType = mediaTypeOf(model);
    if (!mediaType)
      throw ApiError.badRequest(`Model ${model.id} produces ${model.capabilities.output.join(', ')} only; the queue accepts image and video models (use ${model.endpoint} for it)`);
    const n = body.num_generations ?? 1;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 4)
      throw ApiError.badRequest('num_generations must be an integer between 1 and 4');
    const targetRepo = optionalText(body.target_repo, 'target_repo');
    const targetDirectory = optionalText(body.target_directory, 'target_directory');
    const priority = body.priority ?? 'normal';
    if (typeof priority !== 'string' || !(QUEUE_PRIORITIES as readonly string[]).includes(priority))
      throw ApiError.badRequest(`priority must be one of ${QUEUE_PRIORITIES.join(', ')}`);
    const params = Object.fromEntries(Object.entries(body).filter(([k]) => !CONTROL_FIELDS.has(k)));
    parseWebhookRequest(params);
    const shadowing = Object.keys(params).filter((k) => k !== 'prompt' && (RECORD_FIELDS as readonly string[]).includes(k));
    if (shadowing.length) throw ApiError.badRequest(`Reserved field(s) cannot be submitted: ${shadowing.join(', ')}`);
    const prompt = typeof params.prompt === 'string' ? params.prompt : '';
    // The same estimate the synchronous endpoints reserve: an upper bound of what one run costs,
    // from parameters that passed the model's schema. Parameters are only checked when the
    // generation runs (the contract), so one that fails now is priced at the model's defaults:
    // the generation fails at run time naming it, and its reservation is released.
    const checked = validateModelRequest(model, { ...modelParams(params), model: model.id }, { mode: 'sync' });
    const priced = checked.ok ? (checked.value as Record<string, unknown>) : {};
    const price = usageCost(model as MediaModelDefinition, requestedUsage(model as MediaModelDefinition, priced));

    // Credits first, through the per-namespace group commit (concurrent enqueues of a namespace
    // share one Postgres transaction), all n or none. Then the rows. A crash in between leaves
    // reservations without generations; the queue-worker sweeper releases them.
    validating();
    const items = Array.from({ length: n }, () => ({ id: uuidV7() }));
    const reservations = await this.metrics.timed('queue.reserve', () =>
      this.paid.reserveMany(
        scope.id,
        items.map((i) => ({ amount: price, reference: reservationReference('generation', i.id) })),
        chargeTags(caller, model.id, '/api/ai/queue'),
      ),
    );
    try {
      const rows = items.map(({ id }, k) => ({
        id,
        namespaceId: scope.id,
        ownerId: caller.userId,
        modelName: model.id,
        mediaType,
        prompt,
        params,
        reservationId: reservations[k].id,
        targetRepo: targetRepo ?? null,
        targetDirectory: targetDirectory ?? null,
        priority: priority as QueuePriority,
      }));
      await this.metrics.timed('queue.rows', () => this.generations.insert(rows));
    } catch (err) {
      await Promise.all(reservations.map((r) => this.ledger.release(r.id).catch(() => false)));
      await this.paid.endWork(reservations.map((r) => r.reference));
      throw err;
    }
    const ids = items.map((i) => i.id);

    await this.metrics.timed('queue.dispatch', () =>
      this.dispatcher.dispatch(ids.map((id) => ({ id, mediaType, namespaceId: scope.id, priority: priority as QueuePriority }))),
    );
    return { generations: ids.map((id) => ({ generation_id: id, status: 'queued' as const })) };
  }

  /** Only the namespace the generation bills to: the worker resolves it there too (forWork), never in another namespace. */
  private async deployedImageModel(namespaceId: string, name: string): Promise<ModelDefinition | undefined> {
    const found = await this.deployedModels.forWork(name, namespaceId);
    return found?.adapter.kind === 'style' ? deployedDefinition(found) : undefined;
  }
}
