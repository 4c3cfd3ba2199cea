import { Injectable } from '@nestjs/common';
import { ApiError, parseApiInstant } from '@atelier/contracts';
import { Prisma, PrismaService } from '@atelier/db';

export const USAGE_GROUPS = ['model', 'api_key', 'day', 'endpoint'] as const;
/** The operator's report may also group by namespace. */
export const ADMIN_USAGE_GROUPS = [...USAGE_GROUPS, 'namespace'] as const;
export type UsageGroup = (typeof ADMIN_USAGE_GROUPS)[number];

export interface UsageFigures {
  requests: number;
  input_tokens: number;
  output_tokens: number;
  images: number;
  video_seconds: number;
  /** Decimal string: exactly what was charged. */
  cost: string;
}

export interface UsageRow extends UsageFigures {
  /** The model, key prefix, UTC day (YYYY-MM-DD), endpoint or namespace; null when not recorded (work settled before usage reporting). */
  group: string | null;
  /** With split_by: the second dimension's value, as `group` reads the first. */
  split?: string | null;
}

export interface UsageReport {
  namespace: string | null;
  from: string;
  to: string;
  group_by: UsageGroup;
  /** Present when asked: every row is one (group, split) pair, e.g. a day and a model. */
  split_by?: UsageGroup;
  rows: UsageRow[];
  total: UsageFigures;
}

export interface UsageQuery {
  from?: unknown;
  to?: unknown;
  group_by?: unknown;
  split_by?: unknown;
}

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

/**
 * Usage and spend from the ledger itself: every settled reservation carries what it charged and
 * the usage it delivered (SETTLE_SQL and SETTLE_ONE_SQL write both in one statement), and its
 * closed_at is the charge's own ledger time, so the costs here add up to the namespace's charges
 * in the window to the last decimal. Requests released without a charge (failed, cancelled) are not counted.
 *
 * A namespace's whole past UTC days are summed once into usage_daily (exactly: a day is summed
 * only after nothing can settle into it any more), so a month's report reads a few hundred
 * rows for those days and only the requests of the window's partial days: a busy namespace's
 * month (bench:usage, 1,000,000 requests) answers in milliseconds instead of scanning them all.
 */
@Injectable()
export class UsageReports {
  constructor(private readonly prisma: PrismaService) {}

  /** One namespace (members' GET /api/usage) or, with namespace undefined, all (the operator's). */
  async report(namespace: { id: string; name: string } | undefined, query: UsageQuery, groups: readonly UsageGroup[] = USAGE_GROUPS): Promise<UsageReport> {
    const { from, to } = window(query.from, query.to);
    const groupBy = (query.group_by ?? 'day') as UsageGroup;
    if (typeof query.group_by !== 'undefined' && !(groups as readonly unknown[]).includes(query.group_by))
      throw ApiError.badRequest(`group_by must be one of ${groups.join(', ')}`, { fields: [{ field: 'group_by', message: `must be one of ${groups.join(', ')}` }] });
    const splitBy = query.split_by === undefined || query.split_by === '' ? undefined : (query.split_by as UsageGroup);
    if (splitBy !== undefined && (!(groups as readonly unknown[]).includes(splitBy) || splitBy === groupBy))
      throw ApiError.badRequest(`split_by must be one of ${groups.join(', ')}, other than group_by`, {
        fields: [{ field: 'split_by', message: `must be one of ${groups.join(', ')}, other than group_by` }],
      });
    const column = Prisma.raw(GROUP_COLUMN[groupBy]);
    // A second dimension (a time series per model, say): one more grouping column, labelled alike.
    const split = splitBy ? Prisma.raw(`, ${GROUP_COLUMN[splitBy]} AS spl`) : Prisma.empty;
    const splitLabel = splitBy ? Prisma.raw(`, ${GROUP_LABEL[splitBy].replace('t.grp', 't.spl')} AS spl`) : Prisma.empty;
    const groupColumns = Prisma.raw(splitBy ? '1, 2' : '1');
    const order = Prisma.raw(splitBy ? '1 NULLS LAST, 2 NULLS LAST' : '1 NULLS LAST');
    let source: Prisma.Sql;
    if (namespace) {
      const days = await this.rolledUp(namespace.id, from, to);
      source = days
        ? Prisma.sql`
            SELECT namespace_id, day, api_key_id, model, endpoint, requests, input_tokens, output_tokens, images, video_seconds, charged
            FROM usage_daily WHERE namespace_id = ${namespace.id}::uuid AND day >= ${isoDay(days.first)}::date AND day < ${isoDay(days.end)}::date
            UNION ALL
            ${Prisma.raw(RAW_ROWS)} AND r.namespace_id = ${namespace.id}::uuid
              AND ((r.closed_at >= ${from} AND r.closed_at < ${days.first}) OR (r.closed_at >= ${days.end} AND r.closed_at < ${to}))`
        : Prisma.sql`${Prisma.raw(RAW_ROWS)} AND r.namespace_id = ${namespace.id}::uuid AND r.closed_at >= ${from} AND r.closed_at < ${to}`;
    } else {
      source = Prisma.sql`${Prisma.raw(RAW_ROWS)} AND r.closed_at >= ${from} AND r.closed_at < ${to}`;
    }
    const rows = await this.prisma.$queryRaw<
      { grp: string | null; spl?: string | null; requests: bigint; input_tokens: bigint; output_tokens: bigint; images: bigint; video_seconds: string; cost: string }[]
    >`
      SELECT ${Prisma.raw(GROUP_LABEL[groupBy])} AS grp${splitLabel}, t.requests, t.input_tokens, t.output_tokens, t.images, t.video_seconds, t.cost
      FROM (
        SELECT ${column} AS grp${split}, sum(u.requests)::bigint AS requests, sum(u.input_tokens)::bigint AS input_tokens,
               sum(u.output_tokens)::bigint AS output_tokens, sum(u.images)::bigint AS images,
               sum(u.video_seconds)::text AS video_seconds, sum(u.charged)::text AS cost
        FROM (${source}) u
        GROUP BY ${groupColumns}
      ) t
      ORDER BY ${order}`;
    const out: UsageRow[] = rows.map((r) => ({
      group: r.grp === null ? null : String(r.grp),
      ...(splitBy && { split: r.spl === null || r.spl === undefined ? null : String(r.spl) }),
      requests: Number(r.requests),
      input_tokens: Number(r.input_tokens),
      output_tokens: Number(r.output_tokens),
      images: Number(r.images),
      video_seconds: Number(r.video_seconds),
      cost: new Prisma.Decimal(r.cost).toFixed(),
    }));
    // Costs and video seconds are decimals: summed exactly, not as floats.
    let cost = new Prisma.Decimal(0);
    let videoSeconds = new Prisma.Decimal(0);
    const total: UsageFigures = { requests: 0, input_tokens: 0, output_tokens: 0, images: 0, video_seconds: 0, cost: '0' };
    for (const r of out) {
      total.requests += r.requests;
      total.input_tokens += r.input_tokens;
      total.output_tokens += r.output_tokens;
      total.images += r.images;
      cost = cost.plus(r.cost);
      videoSeconds = videoSeconds.plus(r.video_seconds);
    }
    total.cost = cost.toFixed();
    total.video_seconds = videoSeconds.toNumber();
    return {
      namespace: namespace?.name ?? null,
      from: from.toISOString(),
      to: to.toISOString(),
      group_by: groupBy,
      ...(splitBy && { split_by: splitBy }),
      rows: out,
      total,
    };
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
  }
}

/** The report's rows as CSV (RFC 4180), one line per group, in the JSON's order and columns. */
export function usageCsv(report: UsageReport): string {
  const cell = (v: string | number | null) => {
    const s = v === null ? '' : String(v);
    return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  const columns = [...(report.split_by ? (['group', 'split'] as const) : (['group'] as const)), 'requests', 'input_tokens', 'output_tokens', 'images', 'video_seconds', 'cost'] as const;
  return [columns.join(','), ...report.rows.map((r) => columns.map((c) => cell(r[c] ?? null)).join(','))].join('\r\n') + '\r\n';
}

/**
 * from (inclusive) and to (exclusive): ISO 8601 times or dates (UTC), or Unix seconds. Default:
 * the current UTC calendar month so far.
 */
function window(rawFrom: unknown, rawTo: unknown): { from: Date; to: Date } {
  const problems: { field: string; message: string }[] = [];
  const parse = (value: unknown, field: string): Date | undefined => {
    if (value === undefined || value === '') return undefined;
    const at = parseApiInstant(value);
    if (!at) problems.push({ field, message: 'must be an ISO 8601 time or date, or Unix seconds' });
    return at;
  };
  const now = new Date();
  const from = parse(rawFrom, 'from') ?? new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const to = parse(rawTo, 'to') ?? now;
  if (problems.length === 0 && from >= to) problems.push({ field: 'to', message: 'must be after from' });
  if (problems.length) throw ApiError.badRequest(problems.map((p) => `${p.field} ${p.message}`).join('; '), { fields: problems });
  return { from, to };
}
