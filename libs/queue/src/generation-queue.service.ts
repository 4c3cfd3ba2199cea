import { Inject, Injectable, Logger, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import type { Pool } from 'pg';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { NamespaceAccess, type Caller } from '@atelier/auth';
import { chargeTags, CreditLedger, PaidRequests, reservationReference } from '@atelier/billing';
import { ApiError, CANCEL_JOBS_CHANNEL, IMAGE_GENERATION_QUEUE, UUID_PATTERN, VIDEO_GENERATION_QUEUE, type GenerationJob } from '@atelier/contracts';
import { createPgPool, PrismaService, type GenerationModel } from '@atelier/db';
import { requestedUsage, usageCost } from '@atelier/media';
import { DeployedModels, deployedDefinition, ModelCatalog, validateModelRequest, type MediaModelDefinition, type ModelDefinition } from '@atelier/models';
import { Metrics, requestContext } from '@atelier/observability';
import { uuidV7 } from '@atelier/random';
import { backingServiceFault, BroadcastBus, ConcurrencyLimiter, GroupCommit, JobQueues } from '@atelier/runtime';
import { SignedUrls } from '@atelier/storage';
import { RECORD_FIELDS, toGenerationRecord, type GenerationRecord, type GenerationJsonRow, type LiveFields } from './generation-record';
import { GenerationProgress } from './generation-progress';
import { QUEUE_PRIORITIES, QueuePositions, type QueuePriority } from './queue-positions';
import { modelParams, parseWebhookRequest } from './webhook-request';
import { WebhookNotifier } from './webhook-notifier.service';
import { WebhookSecrets } from './webhook-secrets.service';

export const MAX_PAGE_SIZE = 100;
const STATUSES = ['queued', 'processing', 'succeeded', 'failed', 'cancelled'] as const;
const CONTROL_FIELDS = new Set(['model', 'num_generations', 'target_namespace', 'target_repo', 'target_directory', 'priority']);

/** Far past any real listing; beyond it Postgres's OFFSET overflows (a 500 before). */
const MAX_OFFSET = 1_000_000;

export function queueFor(mediaType: 'image' | 'video') {
  return mediaType === 'image' ? IMAGE_GENERATION_QUEUE : VIDEO_GENERATION_QUEUE;
}

export function mediaTypeOf(model: ModelDefinition): 'image' | 'video' | undefined {
  if (model.capabilities.output.includes('video')) return 'video';
  if (model.capabilities.output.includes('image')) return 'image';
  return undefined;
}

export interface ListQuery {
  namespace?: unknown;
  model?: unknown;
  status?: unknown;
  media_type?: unknown;
  repo?: unknown;
  folder?: unknown;
  limit?: unknown;
  offset?: unknown;
}

const optionalText = (value: unknown, name: string): string | undefined => {
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string') throw ApiError.badRequest(`${name} must be given once, as a string`);
  return value;
};

/** A queued generation's row as enqueue writes it; the other columns take their defaults. */
interface GenerationRow {
  id: string;
  namespaceId: string;
  ownerId: string;
  modelName: string;
  mediaType: 'image' | 'video';
  prompt: string;
  params: Record<string, unknown>;
  reservationId: string;
  targetRepo: string | null;
  targetDirectory: string | null;
  priority: QueuePriority;
}

// Column-wise (unnest): one statement whatever the row count, planned once per connection.
const INSERT_GENERATIONS = {
  name: 'atelier_insert_generations_v2',
  text: `
    INSERT INTO generations (id, namespace_id, owner_id, model_name, media_type, prompt, params, reservation_id, target_repo, target_directory, priority)
    SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::"MediaType"[], $6::text[], $7::jsonb[], $8::uuid[], $9::text[], $10::text[], $11::"GenerationPriority"[])`,
};

/**
 * A generations row as toGenerationRecord reads it, as ONE json value with its times in Unix
 * seconds. node-postgres spends its per-query CPU on each column of a result (a parser and a
 * field of every row per column, the dates parsed in JavaScript): as fourteen columns, a poll's
 * read cost the gateway 60-80 us of client CPU; as one, 47-56 us (same statement, same machine).
 * The cost stays text: numeric(20,6) has more digits than a JSON number keeps.
 */
const recordJson = (extra = '') => `json_build_object('id', g.id, 'modelName', g.model_name, 'mediaType', g.media_type, 'prompt', g.prompt,
  'status', g.status, 'params', g.params, 'resultKeys', coalesce(g.result_keys, '{}'), 'errorMessage', g.error_message, 'cost', g.cost::text,
  'targetRepo', g.target_repo, 'targetDirectory', g.target_directory, 'priority', g.priority, 'enqueuedAt', floor(extract(epoch FROM g.enqueued_at))::bigint,
  'startedAt', floor(extract(epoch FROM g.started_at))::bigint, 'completedAt', floor(extract(epoch FROM g.completed_at))::bigint${extra}) AS row`;

/** One generation with its namespace (GET and DELETE /api/ai/queue/:id, its webhook deliveries). */
const READ_GENERATION = {
  name: 'atelier_read_generation_v2',
  text: `
    SELECT ${recordJson(`, 'namespaceId', g.namespace_id, 'namespace', n.name`)}
    FROM generations g JOIN namespaces n ON n.id = g.namespace_id
    WHERE g.id = $1::uuid`,
};

/** GET /api/ai/queue's filters beyond the namespace; each one given narrows the list. */
interface ListFilters {
  status?: string;
  model?: string;
  mediaType?: string;
  repo?: string;
  folder?: string;
}

const FILTER_COLUMNS: Record<Exclude<keyof ListFilters, 'status'>, string> = {
  model: 'g.model_name',
  mediaType: 'g.media_type',
  repo: 'g.target_repo',
  folder: 'g.target_directory',
};

/**
 * The list's count and page in one statement (one round trip, one result for node-postgres to
 * read), holding only the filters given. Only the default listing (the active generations, what
 * a dashboard polls) is prepared: its plan depends on the namespace alone. Any other is planned
 * for its own values each time, since a generic plan cannot tell how many rows a status or a
 * filter leaves: for a namespace with 100,000 succeeded generations it sorted them all for a
 * first page (20 ms, against 0.05 ms).
 */
function listStatement(namespaceId: string, filters: ListFilters, limit: number, offset: number) {
  const values: unknown[] = [namespaceId];
  const where = ['g.namespace_id = $1::uuid'];
  if (filters.status) {
    values.push(filters.status.split(','));
    where.push(`g.status = ANY($${values.length}::"GenerationStatus"[])`);
  } else where.push(`g.status IN ('queued', 'processing')`);
  for (const [key, column] of Object.entries(FILTER_COLUMNS) as [keyof typeof FILTER_COLUMNS, string][]) {
    if (filters[key] === undefined) continue;
    values.push(filters[key]);
    where.push(`${column} = $${values.length}`);
  }
  const matching = `FROM generations g WHERE ${where.join(' AND ')}`;
  // json_agg keeps the page's order only when told: its input order is not the subquery's.
  const text = `SELECT (SELECT count(*)::int ${matching}) AS count,
    coalesce((SELECT json_agg(p.row ORDER BY p.enqueued_at DESC, p.id DESC) FROM (
      SELECT ${recordJson()}, g.enqueued_at, g.id ${matching}
      ORDER BY g.enqueued_at DESC, g.id DESC LIMIT $${values.length + 1} OFFSET $${values.length + 2}) p), '[]') AS rows`;
  return { ...(values.length === 1 && { name: 'atelier_list_active_generations_v3' }), text, values: [...values, limit, offset] };
}

type GenerationRead = GenerationJsonRow & { namespaceId: string; namespace: string };

const notFound = () => new ApiError('resource_not_found', 'Generation not found');

/** Enqueue, read, list and cancel queued generations (the gateway side of the async queue). */
@Injectable()
export class GenerationQueue implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger(GenerationQueue.name);
  /** Concurrent enqueues write their rows in one INSERT (one commit) per batch. */
  private readonly rows = new GroupCommit<GenerationRow[], void>(async (batches) => {
    const rows = batches.flat();
    this.pool ??= createPgPool(this.config.DATABASE_URL, 1, 'atelier-generation-rows');
    await this.pool.query({
      ...INSERT_GENERATIONS,
      values: [
        rows.map((r) => r.id), rows.map((r) => r.namespaceId), rows.map((r) => r.ownerId), rows.map((r) => r.modelName),
        rows.map((r) => r.mediaType), rows.map((r) => r.prompt), rows.map((r) => JSON.stringify(r.params)), rows.map((r) => r.reservationId),
        rows.map((r) => r.targetRepo), rows.map((r) => r.targetDirectory), rows.map((r) => r.priority),
      ],
    });
    return batches.map(() => undefined);
  });
  /**
   * Its own single connection (one batch is written at a time): through Prisma, createMany of a
   * batch cost the gateway more CPU than the rest of an enqueue's bookkeeping.
   */
  private pool?: Pool;
  /**
   * Reads of generations (GET /api/ai/queue/:id, what a client polls until it is done, and the
   * list), on pg with prepared statements: through Prisma the single read cost the gateway about
   * 0.22 ms of CPU per request, ten times an authenticated GET of a model (numbers in the issue note).
   */
  private reads?: Pool;
  /** ... and add their jobs in one BullMQ addBulk per queue and batch. */
  private readonly adds = {
    image: this.jobAdder('image'),
    video: this.jobAdder('video'),
  };

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly prisma: PrismaService,
    private readonly ledger: CreditLedger,
    private readonly paid: PaidRequests,
    private readonly access: NamespaceAccess,
    private readonly queues: JobQueues,
    private readonly bus: BroadcastBus,
    private readonly urls: SignedUrls,
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
    private readonly metrics: Metrics,
    private readonly positions: QueuePositions,
    private readonly progress: GenerationProgress,
    private readonly webhooks: WebhookNotifier,
    private readonly secrets: WebhookSecrets,
    private readonly slots: ConcurrencyLimiter,
    private readonly deployedModels: DeployedModels,
  ) {}

  async onModuleDestroy(): Promise<void> {
    await Promise.all([this.pool?.end(), this.reads?.end()]);
  }

  /**
   * A generation holds its max_concurrent slot until it ends; should the release be lost, a
   * full limit checks its generations' real state before refusing anyone.
   */
  onModuleInit(): void {
    const prefix = reservationReference('generation', '');
    this.slots.setActiveCheck(prefix, async (members) => {
      const ids = members.map((m) => m.slice(prefix.length)).filter((id) => UUID_PATTERN.test(id));
      const rows = await this.prisma.generation.findMany({ where: { id: { in: ids }, status: { in: ['queued', 'processing'] } }, select: { id: true } });
      return new Set(rows.map((r) => prefix + r.id));
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
      await this.metrics.timed('queue.rows', () => this.rows.submit(rows));
    } catch (err) {
      await Promise.all(reservations.map((r) => this.ledger.release(r.id).catch(() => false)));
      await this.paid.endWork(reservations.map((r) => r.reference));
      throw err;
    }
    const ids = items.map((i) => i.id);

    await this.metrics.timed('queue.dispatch', () => this.dispatch(ids.map((id) => ({ id, mediaType, namespaceId: scope.id, priority: priority as QueuePriority }))));
    return { generations: ids.map((id) => ({ generation_id: id, status: 'queued' as const })) };
  }

  /** Only the namespace the generation bills to: the worker resolves it there too (forWork), never in another namespace. */
  private async deployedImageModel(namespaceId: string, name: string): Promise<ModelDefinition | undefined> {
    const found = await this.deployedModels.forWork(name, namespaceId);
    return found?.adapter.kind === 'style' ? deployedDefinition(found) : undefined;
  }

  /** Adds the jobs; duplicates are harmless (jobId = generation id), losses are re-dispatched. */
  async dispatch(items: { id: string; mediaType: 'image' | 'video'; namespaceId: string; priority: QueuePriority }[]): Promise<void> {
    for (const mediaType of ['image', 'video'] as const) {
      const batch = items.filter((i) => i.mediaType === mediaType);
      if (batch.length === 0) continue;
      // The enqueueing request's id follows the job into the worker's logs (re-dispatches have none).
      const requestId = requestContext.current()?.requestId;
      // The rows are already durable: with Redis away the enqueue still succeeds, and the
      // queue-worker's sweeper adds these jobs once Redis is back.
      await this.adds[mediaType]
        .submit(batch.map((i) => ({ payload: { generationId: i.id, requestId: requestId ?? i.id, namespaceId: i.namespaceId }, jobId: i.id, namespaceId: i.namespaceId, priority: i.priority })))
        .catch((err: Error) => {
          // During a Redis outage every enqueue lands here; the 503s elsewhere already say Redis is away.
          const log = backingServiceFault(err) ? 'debug' : 'warn';
          this.logger[log](`Could not add ${batch.length} job(s) now (${err.message}); the dispatcher will retry`);
        });
    }
  }

  private jobAdder(mediaType: 'image' | 'video') {
    type Jobs = { payload: GenerationJob; jobId: string; namespaceId: string; priority: QueuePriority }[];
    return new GroupCommit<Jobs, void>(async (batches) => {
      const jobs = batches.flat();
      // The place in the fair order first: it is the job's BullMQ priority, and it is there
      // before any worker can start the job and take it out again.
      const { priorities, moved } = await this.positions.add(
        mediaType,
        jobs.map((j) => ({ id: j.jobId, namespaceId: j.namespaceId, priority: j.priority })),
      );
      await this.queues.addBulk(
        queueFor(mediaType),
        jobs.map((j, i) => ({ payload: j.payload, jobId: j.jobId, priority: priorities[i] })),
      );
      // Outranked generations of the namespace moved one place on. A crash before this leaves
      // them in their old BullMQ order: each still runs once, only out of priority order.
      if (moved.length) await this.queues.changePriorities(queueFor(mediaType), moved.map((m) => ({ jobId: m.id, priority: m.priority })));
      return batches.map(() => undefined);
    });
  }

  /** The generation if the caller may see it; unknown, malformed and foreign ids all look the same (404). */
  private async findVisible(caller: Caller, id: string): Promise<GenerationRead> {
    if (!UUID_PATTERN.test(id)) throw notFound();
    const { rows } = await this.readPool().query<{ row: GenerationRead }>({ ...READ_GENERATION, values: [id] });
    const row = rows[0]?.row;
    if (!row || !(await this.access.canAccess(caller, row.namespaceId))) throw notFound();
    return row;
  }

  async get(caller: Caller, id: string): Promise<GenerationRecord> {
    const row = await this.findVisible(caller, id);
    const live = await this.liveFields([row]);
    return toGenerationRecord(row, row.namespace, (key) => this.urls.url(key), live.get(row.id));
  }

  private readPool(): Pool {
    return (this.reads ??= createPgPool(this.config.DATABASE_URL, 2, 'atelier-generation-reads'));
  }

  /** queue_position of the queued rows (one ZRANK each, pipelined); progress comes with the running ones. */
  private async liveFields(rows: Pick<GenerationModel, 'id' | 'status' | 'mediaType'>[]): Promise<Map<string, LiveFields>> {
    const out = new Map<string, LiveFields>();
    const queued = rows.filter((r) => r.status === 'queued').map((r) => ({ id: r.id, pool: r.mediaType }));
    const processing = rows.filter((r) => r.status === 'processing').map((r) => r.id);
    const [positions, progress] = await Promise.all([
      this.positions.positions(queued).catch(() => new Map<string, number | null>()),
      this.progress.read(processing).catch(() => new Map<string, number | null>()),
    ]);
    for (const { id } of queued) out.set(id, { queuePosition: positions.get(id) ?? null, progress: null });
    for (const id of processing) out.set(id, { queuePosition: null, progress: progress.get(id) ?? null });
    return out;
  }

  async list(caller: Caller, query: ListQuery): Promise<{ count: number; generations: GenerationRecord[]; limit: number; offset: number }> {
    const scope = await this.access.resolve(caller, query.namespace);
    // One status, several separated by commas (a gallery of everything is one request), or `all`.
    const given = optionalText(query.status, 'status');
    const status = given === 'all' ? STATUSES.join(',') : given;
    if (status !== undefined && !status.split(',').every((one) => (STATUSES as readonly string[]).includes(one)))
      throw ApiError.badRequest(`status must be one of ${STATUSES.join(', ')}, several of them separated by commas, or all`);
    const mediaType = optionalText(query.media_type, 'media_type');
    if (mediaType && mediaType !== 'image' && mediaType !== 'video') throw ApiError.badRequest('media_type must be image or video');
    const limit = query.limit === undefined ? 50 : Number(query.limit);
    const offset = query.offset === undefined ? 0 : Number(query.offset);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE)
      throw ApiError.badRequest(`limit must be an integer between 1 and ${MAX_PAGE_SIZE}`);
    if (!Number.isInteger(offset) || offset < 0 || offset > MAX_OFFSET) throw ApiError.badRequest(`offset must be an integer between 0 and ${MAX_OFFSET}`);
    const filters = { status, mediaType, model: optionalText(query.model, 'model'), repo: optionalText(query.repo, 'repo'), folder: optionalText(query.folder, 'folder') };
    const { rows: [{ count, rows }] } = await this.readPool().query<{ count: number; rows: GenerationJsonRow[] }>(listStatement(scope.id, filters, limit, offset));
    const live = await this.liveFields(rows);
    return { count, generations: rows.map((r) => toGenerationRecord(r, scope.name, (key) => this.urls.url(key), live.get(r.id))), limit, offset };
  }

  /**
   * Active -> cancelled with the reservation released; a queued job is removed, a running one
   * is told to abort. A terminal generation is left as it is. Never emits a completion event.
   * Its completed webhook, if it asked for one, goes through the outbox with the transition
   * (a row that broadcasts nothing): a gateway that dies before queuing it leaves it to the
   * outbox sweeper, which queues it under the same message id.
   */
  async cancel(caller: Caller, id: string): Promise<{ status: 'success'; generation_id: string }> {
    const row = await this.findVisible(caller, id);
    const wantsWebhook = (row.params as { webhook?: unknown } | null)?.webhook !== undefined;
    const cancelled = await this.prisma.$transaction(async (tx) => {
      const rows = await tx.$queryRaw<{ reservation_id: string | null; owner_id: string }[]>`
        UPDATE generations SET status = 'cancelled', completed_at = now()
        WHERE id = ${id}::uuid AND status IN ('queued', 'processing')
        RETURNING reservation_id::text, owner_id::text`;
      if (rows.length === 0) return false;
      if (rows[0].reservation_id) await this.ledger.release(rows[0].reservation_id, tx);
      if (wantsWebhook)
        await tx.generationEvent.create({ data: { generationId: id, userId: rows[0].owner_id, payload: { generation_id: id, status: 'cancelled' }, broadcast: false } });
      return true;
    });
    if (cancelled) {
      await this.paid.endWork([reservationReference('generation', id)]);
      const contract = queueFor(row.mediaType);
      await this.queues.remove(contract, id);
      await this.positions.remove(row.mediaType, id, row.namespaceId).catch(() => undefined);
      if (wantsWebhook) {
        try {
          await this.webhooks.queueMessage(id, 'completed', row.params);
          await this.prisma.generationEvent.update({ where: { generationId: id }, data: { publishedAt: new Date() } });
        } catch (err) {
          this.logger.warn(`Completed webhook of cancelled generation ${id} not queued yet (${(err as Error).message}); the outbox sweeper will`);
        }
      }
      await this.bus.publish(CANCEL_JOBS_CHANNEL, { queue: contract.name, jobIds: [id], reason: 'cancelled by the user' }).catch(() => undefined);
    }
    return { status: 'success', generation_id: id };
  }

  /** The delivery attempts of a generation's webhook messages, oldest first (its owner's namespace only). */
  async webhookDeliveries(caller: Caller, id: string): Promise<{ deliveries: WebhookDeliveryView[] }> {
    const row = await this.findVisible(caller, id);
    const rows = await this.prisma.webhookDelivery.findMany({ where: { generationId: row.id }, orderBy: [{ at: 'asc' }, { attempt: 'asc' }] });
    return {
      deliveries: rows.map((d) => ({ webhook_id: d.webhookId, type: d.type, attempt: d.attempt, status_code: d.statusCode, error: d.error, at: d.at.toISOString() })),
    };
  }

  /** The webhook signing secret of a namespace the caller belongs to (made on first read), or a new one. */
  async webhookSecret(caller: Caller, namespace: unknown, rotate = false): Promise<{ key: string }> {
    const scope = await this.access.resolve(caller, namespace);
    return { key: rotate ? await this.secrets.rotate(scope.id) : await this.secrets.get(scope.id) };
  }
}

export interface WebhookDeliveryView {
  webhook_id: string;
  type: string;
  attempt: number;
  status_code: number | null;
  error: string | null;
  at: string;
}
