import { Inject, Injectable, Logger } from '@nestjs/common';
import { NamespaceAccess, type Caller, type NamespaceScope } from '@atelier/auth';
import { ApiError, CreateExperimentRequest, EXPERIMENT_NAME, PromoteExperimentRequest, type ChatModelAdapter } from '@atelier/contracts';
import { DeployedModels, deployedDefinition, ModelCatalog, type ChatModelDefinition } from '@atelier/models';
import { parseBody } from '@atelier/runtime';
import { invalid } from '../chat-request';
import { FeedbackRepository, type FeedbackMetricRow } from '../stored-completions/feedback.repository';
import { adaptiveWeights, metricSummary, pickVariant, stickyDraw, type Variant } from './experiment-weights';
import { ExperimentsRepository, type ExperimentRow } from './experiments.repository';

/** How long a gateway routes by the experiments it read (other replicas see a change within this). */
const ROUTE_CACHE_MS = 2000;
/** An adaptive move is kept in the history once some variant's weight moved this much since the last entry. */
const HISTORY_STEP = 0.02;

/** The variant a request was routed to, and the model that serves it. */
export interface RoutedVariant {
  experiment: { id: string; name: string; variant: string; storeByDefault: boolean };
  model: ChatModelDefinition;
  /** A deployed fine-tune: the catalog model serving it and its adapter. */
  deployed?: { serving: string; adapter: ChatModelAdapter };
}

const unix = (d: Date) => Math.floor(d.getTime() / 1000);

/**
 * Experiments (TensorZero's A/B tests, on atelier's own models and fine-tunes): a name that is a
 * model id of its namespace, whose requests go to a variant by weight, sticky per user or per a
 * metadata key. An adaptive experiment moves its weights toward the variant that wins on its
 * metric as feedback arrives; promote sends every request to one variant. Each routed request
 * is recorded with its variant, latency and cost, and feedback on its answer counts for it.
 */
@Injectable()
export class Experiments {
  private readonly logger = new Logger(Experiments.name);
  /** Each namespace's experiments by name, as last read (ROUTE_CACHE_MS). */
  private readonly routes = new Map<string, { at: number; byName: Map<string, ExperimentRow> }>();

  constructor(
    private readonly rows: ExperimentsRepository,
    private readonly metrics: FeedbackRepository,
    private readonly access: NamespaceAccess,
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
    private readonly deployedModels: DeployedModels,
  ) {}

  /**
   * The variant for a request naming `name` in the namespace it bills to, or undefined when no
   * experiment has that name. Sticky draws come from `user` (or the caller) or a metadata value;
   * a request without the sticky key is drawn at random.
   */
  async route(caller: Caller, namespaceId: string, name: string, body: Record<string, unknown>): Promise<RoutedVariant | undefined> {
    const experiment = (await this.routable(namespaceId)).get(name);
    if (!experiment) return undefined;
    const key = stickyKey(experiment.stickyBy, caller, body);
    const variant = pickVariant(experiment.variants, key === undefined ? Math.random() : stickyDraw(experiment.id, key));
    const served = await this.serving(variant.model, namespaceId);
    if (!served) throw new ApiError('resource_not_found', `Model not found: ${variant.model} (a variant of experiment ${experiment.name}; it is no longer deployed)`);
    return { experiment: { id: experiment.id, name: experiment.name, variant: variant.model, storeByDefault: experiment.metricId !== null }, ...served };
  }

  private async routable(namespaceId: string): Promise<Map<string, ExperimentRow>> {
    const hit = this.routes.get(namespaceId);
    if (hit && performance.now() - hit.at < ROUTE_CACHE_MS) return hit.byName;
    const byName = new Map((await this.rows.inNamespace(namespaceId)).map((e) => [e.name, e]));
    if (this.routes.size > 10_000) this.routes.clear();
    this.routes.set(namespaceId, { at: performance.now(), byName });
    return byName;
  }

  /** A catalog chat model, or a chat fine-tune deployed in the namespace. */
  private async serving(model: string, namespaceId: string): Promise<Omit<RoutedVariant, 'experiment'> | undefined> {
    const listed = this.catalog.get(model);
    if (listed) return listed.endpoint === '/chat/completions' ? { model: listed as ChatModelDefinition } : undefined;
    const found = await this.deployedModels.forWork(model, namespaceId);
    if (!found || found.serving.endpoint !== '/chat/completions' || found.adapter.kind === 'style') return undefined;
    return { model: deployedDefinition(found) as ChatModelDefinition, deployed: { serving: found.serving.id, adapter: found.adapter } };
  }

  async create(caller: Caller, body: unknown) {
    const request = parseBody(CreateExperimentRequest, body);
    const scope = await this.access.resolve(caller, request.namespace ?? caller.namespace);
    if (this.catalog.get(request.name)) throw ApiError.conflict(`'${request.name}' is a model of the catalog; an experiment needs a name of its own`);
    if (await this.deployedModels.inNamespace(scope.id, request.name)) throw ApiError.conflict(`'${request.name}' is a model deployed in namespace ${scope.name}; an experiment needs a name of its own`);
    const problems: { field: string; message: string }[] = [];
    for (const [i, v] of request.variants.entries())
      if (!(await this.serving(v.model, scope.id)))
        problems.push({ field: `variants.${i}.model`, message: `variants[${i}].model: '${v.model}' is neither a chat model of the catalog nor a chat fine-tune deployed in namespace ${scope.name}` });
    if (problems.length > 0) throw invalid(problems);
    const metric = request.metric === undefined ? undefined : await this.metrics.metric(scope.id, request.metric);
    if (request.metric !== undefined && !metric)
      throw invalid([{ field: 'metric', message: `metric: no feedback metric '${request.metric}' in namespace ${scope.name}; declare it with POST /api/feedback_metrics` }]);
    const created = await this.rows.create({
      namespaceId: scope.id,
      name: request.name,
      mode: request.mode,
      metricId: metric?.id ?? null,
      stickyBy: request.sticky_by ?? null,
      minWeight: request.min_weight,
      variants: request.variants.map((v) => ({ model: v.model, weight: v.weight })),
    });
    if (!created) throw ApiError.conflict(`Experiment '${request.name}' already exists in namespace ${scope.name}`);
    this.routes.delete(scope.id);
    return this.view(created, scope, metric ? [metric] : []);
  }

  async list(caller: Caller, namespace?: string) {
    const scope = await this.access.resolve(caller, namespace ?? caller.namespace);
    const [experiments, metrics] = await Promise.all([this.rows.inNamespace(scope.id), this.metrics.metrics(scope.id)]);
    return { object: 'list' as const, data: experiments.map((e) => this.view(e, scope, metrics)) };
  }

  /** The experiment with each variant's requests, latency, cost and metric, and its history. */
  async get(caller: Caller, name: string, namespace?: string) {
    const { experiment, scope } = await this.named(caller, name, namespace);
    const metrics = await this.metrics.metrics(scope.id);
    const metric = metrics.find((m) => m.id === experiment.metricId);
    const [requests, tallies, history] = await Promise.all([
      this.rows.requestStats(experiment.id),
      metric ? this.rows.metricTallies(experiment.id, metric.id) : undefined,
      this.rows.history(experiment.id),
    ]);
    const view = this.view(experiment, scope, metrics);
    return {
      ...view,
      variants: view.variants.map((v) => {
        const r = requests.find((s) => s.variant === v.model);
        const count = r?.requests ?? 0;
        return {
          ...v,
          requests: count,
          failed: r?.failed ?? 0,
          latency_ms: { p50: roundMs(r?.p50), p95: roundMs(r?.p95) },
          cost: { total: r?.cost ?? '0', per_request: count > 0 ? (Number(r?.cost ?? 0) / count).toFixed(6) : null },
          metric: metric ? metricSummary(metric.type, tallies?.get(v.model) ?? { count: 0, sum: 0, sumSquares: 0 }) : null,
        };
      }),
      history: history.map((h) => ({ type: h.kind, variants: h.variants, ...(h.model !== null && { model: h.model }), created_at: unix(h.createdAt) })),
    };
  }

  async promote(caller: Caller, name: string, body: unknown, namespace?: string) {
    const request = parseBody(PromoteExperimentRequest, body);
    const { experiment, scope } = await this.named(caller, name, namespace);
    if (!experiment.variants.some((v) => v.model === request.model))
      throw invalid([{ field: 'model', message: `model: '${request.model}' is not a variant of experiment ${experiment.name} (${experiment.variants.map((v) => v.model).join(', ')})` }]);
    const promoted = await this.rows.promote(
      experiment.id,
      experiment.variants.map((v) => ({ model: v.model, weight: v.model === request.model ? 1 : 0 })),
      request.model,
    );
    this.routes.delete(scope.id);
    if (!promoted) throw notFound(name, scope);
    return this.view(promoted, scope, await this.metrics.metrics(scope.id));
  }

  async delete(caller: Caller, name: string, namespace?: string) {
    const { experiment, scope } = await this.named(caller, name, namespace);
    await this.rows.delete(experiment.id);
    this.routes.delete(scope.id);
    return { id: experiment.id, object: 'experiment.deleted' as const, name: experiment.name, deleted: true as const };
  }

  /** A routed request once it ended (after its charge): what the variant's statistics count. Never throws. */
  async record(r: { experimentId: string; variant: string; completionId: string; outcome: string; durationMs: number; cost: string | null }): Promise<void> {
    try {
      await this.rows.record(r);
    } catch (err) {
      // The answer and its charge stand; only the experiment's statistics miss this request.
      this.logger.warn(`experiment request not recorded: ${(err as Error).message}`);
    }
  }

  /**
   * Feedback was given on a stored completion: if an adaptive experiment answered it, its weights
   * are worked out again from all the feedback on its metric. Never throws (the feedback stands).
   */
  async feedbackGiven(completionId: string): Promise<void> {
    try {
      const experimentId = await this.rows.experimentOf(completionId);
      if (!experimentId) return;
      const experiment = await this.rows.byId(experimentId);
      if (!experiment || experiment.mode !== 'adaptive' || experiment.status !== 'running' || experiment.metricId === null) return;
      const metric = (await this.metrics.metrics(experiment.namespaceId)).find((m) => m.id === experiment.metricId);
      if (!metric) return;
      const moved = await this.rows.reweigh(experiment.id, metric.id, (current, tallies, lastRecorded) => {
        const variants = adaptiveWeights(
          current.variants,
          current.variants.map((v) => tallies.get(v.model) ?? { count: 0, sum: 0, sumSquares: 0 }),
          metric.type,
          metric.optimize,
          current.minWeight,
        );
        if (variants.every((w, i) => w.weight === current.variants[i].weight)) return undefined;
        const record = variants.some((w) => Math.abs(w.weight - (lastRecorded.find((l) => l.model === w.model)?.weight ?? 0)) >= HISTORY_STEP);
        return { variants, record };
      });
      if (moved) this.routes.delete(experiment.namespaceId);
    } catch (err) {
      this.logger.warn(`experiment weights not updated after feedback on ${completionId}: ${(err as Error).message}`);
    }
  }

  private async named(caller: Caller, name: string, namespace?: string): Promise<{ experiment: ExperimentRow; scope: NamespaceScope }> {
    const scope = await this.access.resolve(caller, namespace ?? caller.namespace);
    const experiment = EXPERIMENT_NAME.test(name) ? await this.rows.named(scope.id, name) : undefined;
    if (!experiment) throw notFound(name, scope);
    return { experiment, scope };
  }

  private view(e: ExperimentRow, scope: NamespaceScope, metrics: readonly FeedbackMetricRow[]) {
    return {
      id: e.id,
      object: 'experiment' as const,
      name: e.name,
      namespace: scope.name,
      mode: e.mode,
      metric: metrics.find((m) => m.id === e.metricId)?.name ?? null,
      sticky_by: e.stickyBy,
      min_weight: e.minWeight,
      status: e.status,
      promoted_model: e.promotedModel,
      variants: e.variants.map((v: Variant) => ({ model: v.model, weight: v.weight })),
      created_at: unix(e.createdAt),
      updated_at: unix(e.updatedAt),
    };
  }
}

function notFound(name: string, scope: NamespaceScope): ApiError {
  return new ApiError('resource_not_found', `No experiment named '${name.replace(/\0/g, '')}' in namespace ${scope.name}`);
}

function roundMs(ms: number | null | undefined): number | null {
  return ms === null || ms === undefined ? null : Math.round(ms * 10) / 10;
}

/** What keeps a request on its variant: the `user` field (else the caller), or a metadata value. */
function stickyKey(stickyBy: string | null, caller: Caller, body: Record<string, unknown>): string | undefined {
  if (stickyBy === null) return undefined;
  if (stickyBy === 'user') return typeof body.user === 'string' && body.user !== '' ? `user:${body.user}` : `caller:${caller.userId}`;
  const metadata = body.metadata;
  const value = metadata !== null && typeof metadata === 'object' ? (metadata as Record<string, unknown>)[stickyBy.slice('metadata.'.length)] : undefined;
  return typeof value === 'string' ? `metadata:${value}` : undefined;
}
