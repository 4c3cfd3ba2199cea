import { Injectable } from '@nestjs/common';
import type { GenerationCompletedEvent } from '@atelier/contracts';
import { PrismaService, SqlPool, type GenerationModel, type Prisma } from '@atelier/db';
import { GroupCommit } from '@atelier/runtime';
import type { GenerationJsonRow } from './generation-record';
import type { QueuePriority } from './queue-positions';

/** A queued generation's row as enqueue writes it; the other columns take their defaults. */
export interface NewGenerationRow {
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

/** GET /api/ai/queue's filters beyond the namespace; each one given narrows the list. */
export interface GenerationListFilters {
  /** Statuses separated by commas; none: the active ones. */
  status?: string;
  model?: string;
  mediaType?: string;
  repo?: string;
  folder?: string;
}

export type GenerationRead = GenerationJsonRow & { namespaceId: string; namespace: string };

/** What a terminal transition returns of its row. */
export interface FinishedGenerationRow {
  owner_id: string;
  namespace_id: string;
  reservation_id: string | null;
  model_name: string;
  media_type: 'image' | 'video';
  completed_at: Date;
  params: unknown;
}

/** An outbox row (a committed terminal transition) not published yet. */
export interface StrandedEvent {
  generation_id: string;
  payload: GenerationCompletedEvent;
  /** False: a cancel's row, which only carries its completed webhook. */
  broadcast: boolean;
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

const FILTER_COLUMNS: Record<Exclude<keyof GenerationListFilters, 'status'>, string> = {
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
function listStatement(namespaceId: string, filters: GenerationListFilters, limit: number, offset: number) {
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

/**
 * The generations table, as the gateway's side of the queue uses it (enqueue, read, list, cancel).
 * The hot statements (the rows of an enqueue, a poll's read, the list) are plain SQL on the
 * process's SqlPool with prepared statements: through Prisma, createMany of a batch cost the
 * gateway more CPU than the rest of an enqueue's bookkeeping, and the single read about 0.22 ms
 * of CPU per request, ten times an authenticated GET of a model.
 */
@Injectable()
export class GenerationsRepository {
  /** Concurrent enqueues write their rows in one INSERT (one commit) per batch. */
  private readonly rows = new GroupCommit<NewGenerationRow[], void>(async (batches) => {
    const rows = batches.flat();
    await this.sql.query({
      ...INSERT_GENERATIONS,
      values: [
        rows.map((r) => r.id), rows.map((r) => r.namespaceId), rows.map((r) => r.ownerId), rows.map((r) => r.modelName),
        rows.map((r) => r.mediaType), rows.map((r) => r.prompt), rows.map((r) => JSON.stringify(r.params)), rows.map((r) => r.reservationId),
        rows.map((r) => r.targetRepo), rows.map((r) => r.targetDirectory), rows.map((r) => r.priority),
      ],
    });
    return batches.map(() => undefined);
  });

  constructor(
    private readonly prisma: PrismaService,
    private readonly sql: SqlPool,
  ) {}

  /** Writes queued rows; concurrent calls share one INSERT. */
  insert(rows: NewGenerationRow[]): Promise<void> {
    return this.rows.submit(rows);
  }

  async read(id: string): Promise<GenerationRead | undefined> {
    const { rows } = await this.sql.query<{ row: GenerationRead }>({ ...READ_GENERATION, values: [id] });
    return rows[0]?.row;
  }

  async list(namespaceId: string, filters: GenerationListFilters, limit: number, offset: number): Promise<{ count: number; rows: GenerationJsonRow[] }> {
    const { rows: [page] } = await this.sql.query<{ count: number; rows: GenerationJsonRow[] }>(listStatement(namespaceId, filters, limit, offset));
    return page;
  }

  /** Which of these generations are still queued or processing. */
  async active(ids: string[]): Promise<Set<string>> {
    const rows = await this.prisma.generation.findMany({ where: { id: { in: ids }, status: { in: ['queued', 'processing'] } }, select: { id: true } });
    return new Set(rows.map((r) => r.id));
  }

  /**
   * Active -> cancelled, in one transaction with `release` of its reservation and, for a
   * generation that asked for a webhook, its completed message in the outbox (a row that
   * broadcasts nothing). False when it was terminal already (then nothing changes).
   */
  async cancelActive(id: string, opts: { webhook: boolean; release: (reservationId: string, tx: Prisma.TransactionClient) => Promise<unknown> }): Promise<boolean> {
    return this.prisma.$transaction(async (tx) => {
      const rows = await tx.$queryRaw<{ reservation_id: string | null; owner_id: string }[]>`
        UPDATE generations SET status = 'cancelled', completed_at = now()
        WHERE id = ${id}::uuid AND status IN ('queued', 'processing')
        RETURNING reservation_id::text, owner_id::text`;
      if (rows.length === 0) return false;
      if (rows[0].reservation_id) await opts.release(rows[0].reservation_id, tx);
      if (opts.webhook)
        await tx.generationEvent.create({ data: { generationId: id, userId: rows[0].owner_id, payload: { generation_id: id, status: 'cancelled' }, broadcast: false } });
      return true;
    });
  }

  /** The generation's outbox message went out. */
  async markEventPublished(generationId: string): Promise<void> {
    await this.prisma.generationEvent.update({ where: { generationId }, data: { publishedAt: new Date() } });
  }

  // ---- The worker's side: transitions, the outbox, the sweeper's reads ----

  /**
   * queued -> processing (sets started_at); a generation already processing is returned too
   * (BullMQ redelivering the job of a worker that died). `firstStart`: this statement set
   * started_at. Anything else: undefined.
   */
  async startProcessing(id: string): Promise<(GenerationModel & { firstStart: boolean }) | undefined> {
    const rows = await this.prisma.$queryRaw<{ id: string; first: boolean }[]>`
      UPDATE generations SET status = 'processing', started_at = COALESCE(started_at, now())
      WHERE id = ${id}::uuid AND status IN ('queued', 'processing')
      RETURNING id::text, started_at = now()::timestamptz(3) AS first`;
    if (rows.length === 0) return undefined;
    const found = await this.prisma.generation.findUnique({ where: { id } });
    return found ? { ...found, firstStart: rows[0].first } : undefined;
  }

  /**
   * An active generation -> succeeded or failed, and in the same transaction `within` (its credit
   * step and its event, given the row) and the outbox row holding that event; with a cost, the
   * charged cost on the row. Undefined when it was terminal already (a cancel won): nothing changes.
   */
  async finishActive(
    id: string,
    change: { status: 'succeeded' | 'failed'; resultKeys: string[]; error: string | null },
    within: (row: FinishedGenerationRow, tx: Prisma.TransactionClient) => Promise<{ cost?: string; event: GenerationCompletedEvent }>,
  ): Promise<{ row: FinishedGenerationRow; event: GenerationCompletedEvent } | undefined> {
    return this.prisma.$transaction(async (tx) => {
      const rows = await tx.$queryRaw<FinishedGenerationRow[]>`
        UPDATE generations
        SET status = ${change.status}::"GenerationStatus", completed_at = now(), result_keys = ${change.resultKeys}::text[],
            error_message = ${change.error}, started_at = COALESCE(started_at, now())
        WHERE id = ${id}::uuid AND status IN ('queued', 'processing')
        RETURNING owner_id::text, namespace_id::text, reservation_id::text, model_name, media_type::text AS media_type, completed_at, params`;
      if (rows.length === 0) return undefined;
      const row = rows[0];
      const { cost, event } = await within(row, tx);
      if (cost !== undefined) await tx.generation.update({ where: { id }, data: { cost } });
      await tx.generationEvent.create({ data: { generationId: id, userId: row.owner_id, payload: event as unknown as Prisma.InputJsonValue } });
      return { row, event };
    });
  }

  /**
   * Outbox rows older than `olderThanMs` and not published, each handed to `publish` and marked
   * published, in one transaction that claims them with SKIP LOCKED, so two sweepers never publish
   * the same one. Returns how many.
   */
  async publishStrandedEvents(olderThanMs: number, limit: number, publish: (row: StrandedEvent) => Promise<void>): Promise<number> {
    return this.prisma.$transaction(async (tx) => {
      const rows = await tx.$queryRaw<StrandedEvent[]>`
        SELECT generation_id::text, payload, broadcast FROM generation_events
        WHERE published_at IS NULL AND created_at < now() - (${olderThanMs}::int * interval '1 millisecond')
        ORDER BY created_at LIMIT ${limit} FOR UPDATE SKIP LOCKED`;
      for (const row of rows) {
        await publish(row);
        await tx.$executeRaw`UPDATE generation_events SET published_at = now() WHERE generation_id = ${row.generation_id}::uuid`;
      }
      return rows.length;
    });
  }

  /** The namespace's and the owner's names; undefined when either is gone. */
  async namesOf(namespaceId: string, ownerId: string): Promise<{ namespace: string; username: string } | undefined> {
    const [names] = await this.prisma.$queryRaw<{ namespace: string; username: string }[]>`
      SELECT n.name AS namespace, u.username FROM namespaces n, users u
      WHERE n.id = ${namespaceId}::uuid AND u.id = ${ownerId}::uuid`;
    return names;
  }

  /** The status and namespace of each of these generations that still has a row. */
  statuses(ids: string[]): Promise<{ id: string; namespaceId: string; status: string }[]> {
    return this.prisma.generation.findMany({ where: { id: { in: ids } }, select: { id: true, namespaceId: true, status: true } });
  }

  /** Processing generations started before `olderThanMs` ago. */
  longProcessing(olderThanMs: number, limit: number): Promise<{ id: string; mediaType: 'image' | 'video' }[]> {
    return this.prisma.generation.findMany({
      where: { status: 'processing', startedAt: { lt: new Date(Date.now() - olderThanMs) } },
      select: { id: true, mediaType: true },
      take: limit,
    });
  }

  /** Of these reservation ids, those a generation row refers to. */
  async reservationsInUse(ids: string[]): Promise<Set<string>> {
    const rows = await this.prisma.$queryRaw<{ id: string }[]>`
      SELECT reservation_id::text AS id FROM generations WHERE reservation_id = ANY(${ids}::uuid[])`;
    return new Set(rows.map((r) => r.id));
  }

  /** Queued generations enqueued before `olderThanMs` ago, oldest first. */
  queuedBefore(olderThanMs: number, limit: number): Promise<{ id: string; mediaType: 'image' | 'video'; namespaceId: string; priority: QueuePriority }[]> {
    return this.prisma.generation.findMany({
      where: { status: 'queued', enqueuedAt: { lt: new Date(Date.now() - olderThanMs) } },
      select: { id: true, mediaType: true, namespaceId: true, priority: true },
      orderBy: { enqueuedAt: 'asc' },
      take: limit,
    });
  }

  /** A generation with its namespace's name (what a webhook message carries). */
  withNamespace(id: string) {
    return this.prisma.generation.findUnique({ where: { id }, include: { namespace: { select: { name: true } } } });
  }

  /** Active generations counted per pool and namespace, most queued first (the operator's backlog). */
  activeByPoolAndNamespace() {
    return this.prisma.$queryRaw<{ pool: 'image' | 'video'; namespace: string; queue_weight: number | null; queued: number; processing: number }[]>`
      SELECT g.media_type::text AS pool, n.name AS namespace, n.queue_weight,
             count(*) FILTER (WHERE g.status = 'queued')::int AS queued,
             count(*) FILTER (WHERE g.status = 'processing')::int AS processing
      FROM generations g JOIN namespaces n ON n.id = g.namespace_id
      WHERE g.status IN ('queued', 'processing')
      GROUP BY g.media_type, n.name, n.queue_weight
      ORDER BY queued DESC, n.name`;
  }

}
