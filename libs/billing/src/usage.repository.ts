import { Injectable } from '@nestjs/common';
import { Prisma, PrismaService } from '@atelier/db';
import type { UsageGroup } from '@atelier/contracts';

/**
 * What each group reads, on a union of usage_daily and credit_reservations rows (alias u, both
 * shaped alike). Names (key prefix, namespace) are looked up for the handful of groups afterwards.
 */
const GROUP_COLUMN: Record<UsageGroup, string> = {
  model: 'u.model',
  api_key: 'u.api_key_id',
  day: 'u.day',
  endpoint: 'u.endpoint',
  namespace: 'u.namespace_id',
};
const GROUP_LABEL: Record<UsageGroup, string> = {
  model: 't.grp',
  api_key: '(SELECT k.prefix FROM api_keys k WHERE k.id = t.grp)',
  day: "to_char(t.grp, 'YYYY-MM-DD')",
  endpoint: 't.grp',
  namespace: '(SELECT n.name FROM namespaces n WHERE n.id = t.grp)',
};

/** A day is summed into usage_daily only once this long has passed since it ended, so no settle can still land in it. */
const ROLLUP_AFTER_MS = 3600_000;
const DAY_MS = 86_400_000;
const isoDay = (d: Date) => d.toISOString().slice(0, 10);

/** Settled reservations as usage rows (requests 1 each), for the raw part of a window. */
const RAW_ROWS = `SELECT r.namespace_id, (r.closed_at AT TIME ZONE 'UTC')::date AS day, r.api_key_id, r.model, r.endpoint,
  1 AS requests, r.input_tokens::bigint AS input_tokens, r.output_tokens::bigint AS output_tokens, r.images::bigint AS images,
  r.video_seconds, r.charged
  FROM credit_reservations r WHERE r.status = 'settled'`;

/** One group's sums, as the database returns them (bigints, decimals as text). */
export interface UsageSumRow {
  grp: string | null;
  spl?: string | null;
  requests: bigint;
  input_tokens: bigint;
  output_tokens: bigint;
  images: bigint;
  video_seconds: string;
  cost: string;
}

/**
 * The usage tables: settled reservations (the ledger's own rows) and their per-day sums
 * (usage_daily). Raw SQL: a report is one GROUP BY over a union of both, which Prisma's query API
 * cannot say.
 */
@Injectable()
export class UsageRepository {
  constructor(private readonly prisma: PrismaService) {}

  /**
   * Usage in [from, to) grouped by `groupBy` (and `splitBy`), for one namespace (whose whole past
   * days are read from usage_daily, summed first where they are not yet) or, undefined, all.
   */
  async sums(namespace: string | undefined, from: Date, to: Date, groupBy: UsageGroup, splitBy?: UsageGroup): Promise<UsageSumRow[]> {
    const column = Prisma.raw(GROUP_COLUMN[groupBy]);
    // A second dimension (a time series per model, say): one more grouping column, labelled alike.
    const split = splitBy ? Prisma.raw(`, ${GROUP_COLUMN[splitBy]} AS spl`) : Prisma.empty;
    const splitLabel = splitBy ? Prisma.raw(`, ${GROUP_LABEL[splitBy].replace('t.grp', 't.spl')} AS spl`) : Prisma.empty;
    const groupColumns = Prisma.raw(splitBy ? '1, 2' : '1');
    const order = Prisma.raw(splitBy ? '1 NULLS LAST, 2 NULLS LAST' : '1 NULLS LAST');
    let source: Prisma.Sql;
    if (namespace !== undefined) {
      const days = await this.rolledUp(namespace, from, to);
      source = days
        ? Prisma.sql`
            SELECT namespace_id, day, api_key_id, model, endpoint, requests, input_tokens, output_tokens, images, video_seconds, charged
            FROM usage_daily WHERE namespace_id = ${namespace}::uuid AND day >= ${isoDay(days.first)}::date AND day < ${isoDay(days.end)}::date
            UNION ALL
            ${Prisma.raw(RAW_ROWS)} AND r.namespace_id = ${namespace}::uuid
              AND ((r.closed_at >= ${from} AND r.closed_at < ${days.first}) OR (r.closed_at >= ${days.end} AND r.closed_at < ${to}))`
        : Prisma.sql`${Prisma.raw(RAW_ROWS)} AND r.namespace_id = ${namespace}::uuid AND r.closed_at >= ${from} AND r.closed_at < ${to}`;
    } else {
      source = Prisma.sql`${Prisma.raw(RAW_ROWS)} AND r.closed_at >= ${from} AND r.closed_at < ${to}`;
    }
    return this.prisma.$queryRaw<UsageSumRow[]>`
      SELECT ${Prisma.raw(GROUP_LABEL[groupBy])} AS grp${splitLabel}, t.requests, t.input_tokens, t.output_tokens, t.images, t.video_seconds, t.cost
      FROM (
        SELECT ${column} AS grp${split}, sum(u.requests)::bigint AS requests, sum(u.input_tokens)::bigint AS input_tokens,
               sum(u.output_tokens)::bigint AS output_tokens, sum(u.images)::bigint AS images,
               sum(u.video_seconds)::text AS video_seconds, sum(u.charged)::text AS cost
        FROM (${source}) u
        GROUP BY ${groupColumns}
      ) t
      ORDER BY ${order}`;
  }

  /**
   * The whole UTC days of [from, to) that have been over for ROLLUP_AFTER_MS, summed into
   * usage_daily (those not yet, now, in one statement): their range, or undefined when the
   * window holds no such day. Concurrent reports of one namespace sum a day once: the second
   * waits on the first's marker row and then finds the day taken.
   */
  private async rolledUp(namespaceId: string, from: Date, to: Date): Promise<{ first: Date; end: Date } | undefined> {
    const first = new Date(Math.ceil(from.getTime() / DAY_MS) * DAY_MS);
    const end = new Date(Math.floor(Math.min(to.getTime(), Date.now() - ROLLUP_AFTER_MS) / DAY_MS) * DAY_MS);
    if (end <= first) return undefined;
    const days: string[] = [];
    for (let d = first.getTime(); d < end.getTime(); d += DAY_MS) days.push(isoDay(new Date(d)));
    await this.prisma.$executeRaw`
      WITH missing AS (
        SELECT d::date AS day FROM unnest(${days}::text[]) d
        EXCEPT SELECT day FROM usage_rollup_days WHERE namespace_id = ${namespaceId}::uuid AND day >= ${isoDay(first)}::date AND day < ${isoDay(end)}::date
      ), mark AS (
        INSERT INTO usage_rollup_days (namespace_id, day) SELECT ${namespaceId}::uuid, day FROM missing
        ON CONFLICT DO NOTHING RETURNING day
      )
      INSERT INTO usage_daily (id, namespace_id, day, api_key_id, model, endpoint, requests, input_tokens, output_tokens, images, video_seconds, charged)
      SELECT gen_random_uuid(), u.namespace_id, u.day, u.api_key_id, u.model, u.endpoint, count(*), sum(u.input_tokens), sum(u.output_tokens),
             sum(u.images), sum(u.video_seconds), sum(u.charged)
      FROM (${Prisma.raw(RAW_ROWS)} AND r.namespace_id = ${namespaceId}::uuid
              AND r.closed_at >= ((SELECT min(day) FROM mark)::timestamp AT TIME ZONE 'UTC')
              AND r.closed_at < (((SELECT max(day) FROM mark) + 1)::timestamp AT TIME ZONE 'UTC')) u
      WHERE u.day IN (SELECT day FROM mark)
      GROUP BY u.namespace_id, u.day, u.api_key_id, u.model, u.endpoint`;
    return { first, end };
  }}
