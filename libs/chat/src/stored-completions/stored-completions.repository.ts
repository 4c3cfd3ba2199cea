import { Injectable } from '@nestjs/common';
import { Prisma, PrismaService } from '@atelier/db';
import type { ListPage } from '../list-page';

/**
 * JSON for a jsonb column: Postgres text holds no NUL, so an escaped one (\u0000, not preceded by
 * an escaped backslash) is dropped.
 */
export const jsonText = (v: unknown) => JSON.stringify(v).replace(/(?<!\\)((?:\\\\)*)\\u0000/g, '$1');

/** Ids atelier could have kept (a chat completion's, or a Messages answer's): anything else is unknown without a query (and NUL never reaches Postgres). */
export const wellFormedCompletionId = (id: string) => /^(chatcmpl-|msg_)[A-Za-z0-9_-]{1,100}$/.test(id);

export interface StoredCompletionRow {
  id: string;
  namespaceId: string;
  userId: string;
  model: string;
  metadata: Record<string, string>;
  messages: Record<string, unknown>[];
  request: Record<string, unknown>;
  completion: Record<string, unknown>;
  createdAt: Date;
}

export interface FeedbackRow {
  id: string;
  targetId: string;
  completionId: string | null;
  metric: string;
  value: number;
  comment: string | null;
  createdAt: Date;
}

export interface StoredCompletionFilter {
  model?: string;
  metadata?: Record<string, string>;
  /** Only completions with feedback on this metric (its id) of at least minValue (any value when undefined). */
  metricId?: string;
  minValue?: number;
  /** Only completions stored at or after this time. */
  since?: Date;
}


/** The live completions of a namespace that match a filter (`c` is stored_completions). */
function matching(namespaceId: string, filter: StoredCompletionFilter): Prisma.Sql[] {
  const where: Prisma.Sql[] = [Prisma.sql`c.namespace_id = ${namespaceId}::uuid`, Prisma.sql`c.expires_at > now()`];
  if (filter.model !== undefined) where.push(Prisma.sql`c.model = ${filter.model}`);
  if (filter.since !== undefined) where.push(Prisma.sql`c.created_at >= ${filter.since}`);
  if (filter.metadata && Object.keys(filter.metadata).length > 0) where.push(Prisma.sql`c.metadata @> ${jsonText(filter.metadata)}::jsonb`);
  if (filter.metricId !== undefined)
    where.push(
      filter.minValue === undefined
        ? Prisma.sql`EXISTS (SELECT 1 FROM feedback f WHERE f.completion_id = c.id AND f.metric_id = ${filter.metricId}::uuid)`
        : Prisma.sql`EXISTS (SELECT 1 FROM feedback f WHERE f.completion_id = c.id AND f.metric_id = ${filter.metricId}::uuid AND f.value >= ${filter.minValue})`,
    );
  return where;
}

interface RawRow {
  id: string;
  namespace_id: string;
  user_id: string;
  model: string;
  metadata: Record<string, string>;
  messages: Record<string, unknown>[];
  request: Record<string, unknown>;
  completion: Record<string, unknown>;
  created_at: Date;
}
const fromRaw = (r: RawRow): StoredCompletionRow => ({
  id: r.id,
  namespaceId: r.namespace_id,
  userId: r.user_id,
  model: r.model,
  metadata: r.metadata,
  messages: r.messages,
  request: r.request,
  completion: r.completion,
  createdAt: r.created_at,
});

/**
 * Stored chat completions (OpenAI's Stored Completions), per namespace, and the feedback given on
 * them: what the learning loop reads. An expired row reads as unknown at once; the sweep deletes it.
 */
@Injectable()
export class StoredCompletionsRepository {
  constructor(private readonly prisma: PrismaService) {}

  /**
   * Written before the answer goes out (so the caller's next read finds it). Committed without
   * waiting for the WAL flush, as stored responses are: a Postgres crash may lose the last fraction of a second of stored completions,
   * never credits. A retried write of the same id keeps the first.
   */
  async insert(row: Omit<StoredCompletionRow, 'createdAt'> & { expiresAt: Date }): Promise<void> {
    // One statement: set_config(..., true) holds for its own implicit transaction, so one round trip.
    await this.prisma.$executeRaw`
      WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true))
      INSERT INTO stored_completions (id, namespace_id, user_id, model, metadata, messages, request, completion, expires_at)
      SELECT ${row.id}, ${row.namespaceId}::uuid, ${row.userId}::uuid, ${row.model}, ${jsonText(row.metadata)}::jsonb, ${jsonText(row.messages)}::jsonb,
             ${jsonText(row.request)}::jsonb, ${jsonText(row.completion)}::jsonb, ${row.expiresAt} FROM relaxed
      ON CONFLICT (id) DO NOTHING`;
  }

  async byId(id: string): Promise<StoredCompletionRow | undefined> {
    if (!wellFormedCompletionId(id)) return undefined;
    const [row] = await this.prisma.$queryRaw<RawRow[]>`
      SELECT id, namespace_id::text, user_id::text, model, metadata, messages, request, completion, created_at
      FROM stored_completions WHERE id = ${id} AND expires_at > now()`;
    return row && fromRaw(row);
  }

  /**
   * A namespace's stored completions in creation order (ids break ties), after the cursor's row,
   * one more than the limit (so the caller knows whether there are more).
   */
  async list(namespaceId: string, filter: StoredCompletionFilter, page: ListPage): Promise<StoredCompletionRow[]> {
    const where = matching(namespaceId, filter);
    const desc = page.order === 'desc';
    if (page.after !== undefined) {
      const cursor = Prisma.sql`(SELECT created_at FROM stored_completions WHERE id = ${page.after} AND namespace_id = ${namespaceId}::uuid)`;
      where.push(desc ? Prisma.sql`(c.created_at, c.id) < (${cursor}, ${page.after})` : Prisma.sql`(c.created_at, c.id) > (${cursor}, ${page.after})`);
    }
    const rows = await this.prisma.$queryRaw<RawRow[]>`
      SELECT c.id, c.namespace_id::text, c.user_id::text, c.model, c.metadata, c.messages, c.request, c.completion, c.created_at
      FROM stored_completions c WHERE ${Prisma.join(where, ' AND ')}
      ORDER BY ${desc ? Prisma.sql`c.created_at DESC, c.id DESC` : Prisma.sql`c.created_at ASC, c.id ASC`}
      LIMIT ${page.limit + 1}`;
    return rows.map(fromRaw);
  }

  /** How many live completions of the namespace match the filter, counted up to `upTo` (where counting stops). */
  async count(namespaceId: string, filter: StoredCompletionFilter, upTo: number): Promise<number> {
    const [row] = await this.prisma.$queryRaw<{ n: bigint }[]>`
      SELECT count(*) AS n FROM (SELECT 1 FROM stored_completions c WHERE ${Prisma.join(matching(namespaceId, filter), ' AND ')} LIMIT ${upTo}) m`;
    return Number(row.n);
  }

  /** Whether the cursor names a live completion of the namespace. */
  async exists(namespaceId: string, id: string): Promise<boolean> {
    if (!wellFormedCompletionId(id)) return false;
    const rows = await this.prisma.$queryRaw<unknown[]>`SELECT 1 FROM stored_completions WHERE id = ${id} AND namespace_id = ${namespaceId}::uuid AND expires_at > now()`;
    return rows.length > 0;
  }

  async setMetadata(id: string, metadata: Record<string, string>): Promise<void> {
    await this.prisma.$executeRaw`UPDATE stored_completions SET metadata = ${jsonText(metadata)}::jsonb WHERE id = ${id}`;
  }

  /** Deletes it with its feedback (the foreign key cascades); false when it was already gone. */
  async delete(id: string): Promise<boolean> {
    return (await this.prisma.$executeRaw`DELETE FROM stored_completions WHERE id = ${id}`) > 0;
  }

  /** The feedback on these completions, oldest first. */
  async feedbackOn(completionIds: string[]): Promise<FeedbackRow[]> {
    if (completionIds.length === 0) return [];
    const rows = await this.prisma.$queryRaw<{ id: string; target_id: string; completion_id: string | null; metric: string; value: number; comment: string | null; created_at: Date }[]>`
      SELECT f.id::text, f.target_id, f.completion_id, m.name AS metric, f.value, f.comment, f.created_at
      FROM feedback f JOIN feedback_metrics m ON m.id = f.metric_id
      WHERE f.completion_id IN (${Prisma.join(completionIds)}) ORDER BY f.created_at, f.id`;
    return rows.map((r) => ({ id: r.id, targetId: r.target_id, completionId: r.completion_id, metric: r.metric, value: r.value, comment: r.comment, createdAt: r.created_at }));
  }

  /** Deletes up to `batch` expired completions; how many. */
  async deleteExpired(batch: number): Promise<number> {
    return this.prisma.$executeRaw`
      DELETE FROM stored_completions WHERE id IN (SELECT id FROM stored_completions WHERE expires_at <= now() LIMIT ${batch} FOR UPDATE SKIP LOCKED)`;
  }

  /** Namespaces keeping more than `max` completions, and by how many. */
  async overCap(max: number): Promise<{ namespaceId: string; excess: number }[]> {
    const rows = await this.prisma.$queryRaw<{ namespace_id: string; n: bigint }[]>`
      SELECT namespace_id::text, count(*) AS n FROM stored_completions GROUP BY namespace_id HAVING count(*) > ${max}`;
    return rows.map((r) => ({ namespaceId: r.namespace_id, excess: Number(r.n) - max }));
  }

  /** Deletes a namespace's `count` oldest completions (at most `batch` at a time); how many. */
  async deleteOldest(namespaceId: string, count: number): Promise<number> {
    return this.prisma.$executeRaw`
      DELETE FROM stored_completions WHERE id IN (
        SELECT id FROM stored_completions WHERE namespace_id = ${namespaceId}::uuid ORDER BY created_at, id LIMIT ${count} FOR UPDATE SKIP LOCKED)`;
  }
}
