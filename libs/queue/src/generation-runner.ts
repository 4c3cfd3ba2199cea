import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { ApiError } from '@atelier/contracts';
import { MediaRenderer, usageCost } from '@atelier/media';
import { DeployedModels, deployedDefinition, ModelCatalog, validateModelRequest, type MediaModelDefinition } from '@atelier/models';
import { Metrics, TopLabels } from '@atelier/observability';
import { retryThroughOutage } from '@atelier/runtime';
import { GenerationProgress } from './generation-progress';
import { GenerationState } from './generation-state';
import { modelParams } from './webhook-request';

/** Longer than any failover; shorter than GENERATION_LOST_AFTER_MS, after which the sweeper fails the row. */
const OUTAGE_WAIT_MS = 10 * 60_000;

export type RunOutcome = 'succeeded' | 'failed' | 'skipped' | 'cancelled';

/**
 * Runs one queued generation end to end. At-least-once delivery is made exactly-once in effect
 * by the state machine: a redelivered job resumes, a finished or cancelled one is skipped.
 */
@Injectable()
export class GenerationRunner {
  private readonly logger = new Logger(GenerationRunner.name);
  /** The namespaces the queue-wait metric names: the ten this worker started most. */
  private readonly waitLabels = new TopLabels(10);
  /** Their names, by id (a namespace's name never changes). */
  private readonly namespaceNames = new Map<string, string>();

  /** The queue-wait metric's label for a namespace: its name if it is among the top ten, else `other`. */
  private async namespaceLabel(namespaceId: string): Promise<string> {
    const label = this.waitLabels.label(namespaceId);
    if (label === 'other') return label;
    let name = this.namespaceNames.get(namespaceId);
    if (name === undefined) {
      name = (await this.state.namespaceName(namespaceId).catch(() => undefined)) ?? 'other';
      if (this.namespaceNames.size >= 1000) this.namespaceNames.clear();
      this.namespaceNames.set(namespaceId, name);
    }
    return name;
  }

  constructor(
    private readonly state: GenerationState,
    private readonly media: MediaRenderer,
    private readonly progress: GenerationProgress,
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
    private readonly deployedModels: DeployedModels,
    @Optional() private readonly metrics?: Metrics,
  ) {}

  async run(id: string, signal: AbortSignal): Promise<RunOutcome> {
    const seen: { model?: string } = {};
    const outcome = await this.runOnce(id, signal, seen);
    if (outcome !== 'skipped') this.metrics?.generations.inc({ model: seen.model ?? 'unknown', outcome, mode: 'queue' });
    return outcome;
  }

  /**
   * Database steps wait out a Postgres outage instead of failing the attempt: a rendered result
   * is never thrown away for a lost connection, and an outage never uses up a job's attempts.
   * Every step is a conditional update or a read, so repeating it is harmless.
   */
  private durably<T>(id: string, signal: AbortSignal, op: () => Promise<T>): Promise<T> {
    return retryThroughOutage(op, {
      maxWaitMs: OUTAGE_WAIT_MS,
      signal,
      onWait: (service) => this.logger.warn(`${service} unavailable; generation ${id} waits for it`),
    });
  }

  /** Fails a generation for good (its job is out of attempts), waiting out a Postgres outage. */
  failDurably(id: string, message: string, signal: AbortSignal): Promise<boolean> {
    return this.durably(id, signal, () => this.state.fail(id, message));
  }

  private async runOnce(id: string, signal: AbortSignal, seen: { model?: string }): Promise<RunOutcome> {
    const durably = <T>(op: () => Promise<T>) => this.durably(id, signal, op);
    const row = await durably(() => this.state.start(id));
    if (!row) return 'skipped';
    // A redelivered job's wait was observed at its first start.
    if (this.metrics && row.startedAt && row.firstStart)
      this.metrics.generationWait.observe({ pool: row.mediaType, namespace: await this.namespaceLabel(row.namespaceId) }, (row.startedAt.getTime() - row.enqueuedAt.getTime()) / 1000);
    seen.model = row.modelName;
    // A catalog model, or a deployed atelier/local-image fine-tune (rendered by its serving model in its style).
    const deployed = this.catalog.get(row.modelName) ? undefined : await durably(() => this.deployedModels.forWork(row.modelName, row.namespaceId));
    const model = deployed?.adapter.kind === 'style' ? deployedDefinition(deployed) : this.catalog.get(row.modelName);
    if (!model) {
      await durably(() => this.state.fail(id, `Model not found: ${row.modelName}`));
      return 'failed';
    }
    // Parameters are checked now, not at enqueue (the spec): a bad one fails this generation.
    const checked = validateModelRequest(model, { ...modelParams(row.params as Record<string, unknown>), model: model.id }, { mode: 'sync' });
    if (!checked.ok) {
      await durably(() => this.state.fail(id, checked.errors.map((e) => e.message).join('; ')));
      return 'failed';
    }
    const caller = await durably(() => this.state.runFor(row));
    const target = { ...(row.targetRepo ? { repo: row.targetRepo } : {}), ...(row.targetDirectory ? { directory: row.targetDirectory } : {}) };
    let result;
    const progress = this.progress.reporter(id);
    try {
      // The same engines and storage layout as the synchronous endpoints.
      result = await this.media.render(
        {
          caller,
          model: deployed?.adapter.kind === 'style' ? deployed.serving.id : model.id,
          ...(deployed?.adapter.kind === 'style' && { deployed: { name: deployed.name, adapter: deployed.adapter } }),
          params: checked.value as Record<string, unknown>,
          target,
        },
        signal,
        progress.report,
      );
    } catch (err) {
      if (signal.aborted) return 'cancelled';
      // Problems of the request itself (unreachable input, provider refusal) fail the generation;
      // anything else (database, storage) is retried by BullMQ.
      if (err instanceof ApiError && (err.status < 500 || err.type === 'upstream_error')) {
        await durably(() => this.state.fail(id, err.message));
        return 'failed';
      }
      throw err;
    } finally {
      await progress.flush();
    }
    if (signal.aborted) return 'cancelled';
    const cost = usageCost(model as MediaModelDefinition, result.usage);
    const done = await durably(() => this.state.succeed(id, result.outputs.map((o) => o.key), cost, result.usage));
    if (!done) this.logger.log(`Generation ${id} finished after it was cancelled; result discarded`);
    return done ? 'succeeded' : 'cancelled';
  }
}
