import { Injectable } from '@nestjs/common';
import { ApiError } from '@atelier/contracts';
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
}

export interface UsageReport {
  namespace: string | null;
  from: string;
  to: string;
  group_by: UsageGroup;
  rows: UsageRow[];
  total: UsageFigures;
}

export interface UsageQuery {
  from?: unknown;
  to?: unknown;
  group_by?: unknown;
}

/**
 * Column each group reads, on credit_reservations (alias r). The inner query groups by the raw
 * column (a uuid, a date) so a month of a busy namespace aggregates in one pass over its index
 * range; names (key prefix, namespace) are joined to the handful of groups afterwards.
 */
const GROUP_COLUMN: Record<UsageGroup, string> = {
  model: 'r.model',
  api_key: 'r.api_key_id',
  day: 'r.closed_day',
  endpoint: 'r.endpoint',
  namespace: 'r.namespace_id',
};
const GROUP_LABEL: Record<UsageGroup, string> = {
  model: 't.grp',
  api_key: '(SELECT k.prefix FROM api_keys k WHERE k.id = t.grp)',
  day: "to_char(t.grp, 'YYYY-MM-DD')",
  endpoint: 't.grp',
  namespace: '(SELECT n.name FROM namespaces n WHERE n.id = t.grp)',
};

/**
 * Usage and spend from the ledger itself: every settled reservation carries what it charged and
 * the usage it delivered (SETTLE_SQL writes both in one statement), and its closed_at is the
 * charge's own ledger time, so the costs here add up to the namespace's charges in the window
 * to the last decimal. Requests released without a charge (failed, cancelled) are not counted.
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
    const column = GROUP_COLUMN[groupBy];
    const scope = namespace ? Prisma.sql`r.namespace_id = ${namespace.id}::uuid AND` : Prisma.empty;
    const rows = await this.prisma.$queryRaw<
      { grp: string | null; requests: number; input_tokens: bigint; output_tokens: bigint; images: bigint; video_seconds: string; cost: string }[]
    >`
      SELECT ${Prisma.raw(GROUP_LABEL[groupBy])} AS grp, t.requests, t.input_tokens, t.output_tokens, t.images, t.video_seconds, t.cost
      FROM (
        SELECT ${Prisma.raw(column)} AS grp, count(*)::int AS requests, sum(r.input_tokens)::bigint AS input_tokens,
               sum(r.output_tokens)::bigint AS output_tokens, sum(r.images)::bigint AS images,
               sum(r.video_seconds)::text AS video_seconds, sum(r.charged)::text AS cost
        FROM credit_reservations r
        WHERE ${scope} r.status = 'settled' AND r.closed_at >= ${from} AND r.closed_at < ${to}
        GROUP BY 1
      ) t
      ORDER BY 1 NULLS LAST`;
    const out: UsageRow[] = rows.map((r) => ({
      group: r.grp === null ? null : String(r.grp),
      requests: r.requests,
      input_tokens: Number(r.input_tokens),
      output_tokens: Number(r.output_tokens),
      images: Number(r.images),
      video_seconds: Number(r.video_seconds),
      cost: new Prisma.Decimal(r.cost).toFixed(),
    }));
    const total = out.reduce<UsageFigures & { c: Prisma.Decimal; v: Prisma.Decimal }>(
      (t, r) => ({
        requests: t.requests + r.requests,
        input_tokens: t.input_tokens + r.input_tokens,
        output_tokens: t.output_tokens + r.output_tokens,
        images: t.images + r.images,
        video_seconds: 0,
        cost: '',
        c: t.c.plus(r.cost),
        v: t.v.plus(r.video_seconds),
      }),
      { requests: 0, input_tokens: 0, output_tokens: 0, images: 0, video_seconds: 0, cost: '', c: new Prisma.Decimal(0), v: new Prisma.Decimal(0) },
    );
    return {
      namespace: namespace?.name ?? null,
      from: from.toISOString(),
      to: to.toISOString(),
      group_by: groupBy,
      rows: out,
      total: {
        requests: total.requests,
        input_tokens: total.input_tokens,
        output_tokens: total.output_tokens,
        images: total.images,
        video_seconds: total.v.toNumber(),
        cost: total.c.toFixed(),
      },
    };
  }
}

/** The report's rows as CSV (RFC 4180), one line per group, in the JSON's order and columns. */
export function usageCsv(report: UsageReport): string {
  const cell = (v: string | number | null) => {
    const s = v === null ? '' : String(v);
    return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  const columns = ['group', 'requests', 'input_tokens', 'output_tokens', 'images', 'video_seconds', 'cost'] as const;
  return [columns.join(','), ...report.rows.map((r) => columns.map((c) => cell(r[c])).join(','))].join('\r\n') + '\r\n';
}

/**
 * from (inclusive) and to (exclusive): ISO 8601 times or dates (UTC), or Unix seconds. Default:
 * the current UTC calendar month so far.
 */
function window(rawFrom: unknown, rawTo: unknown): { from: Date; to: Date } {
  const problems: { field: string; message: string }[] = [];
  const parse = (value: unknown, field: string): Date | undefined => {
    if (value === undefined || value === '') return undefined;
    const ms =
      typeof value === 'string' && /^\d{1,12}$/.test(value)
        ? Number(value) * 1000
        : typeof value === 'string' && /^\d{4}-\d\d-\d\d(?:[T ][\d:.]+(?:Z|[+-]\d\d:?\d\d)?)?$/.test(value)
          ? Date.parse(/^\d{4}-\d\d-\d\d$/.test(value) ? `${value}T00:00:00Z` : value)
          : NaN;
    if (!Number.isFinite(ms) || ms < 0 || ms > 8.64e15) {
      problems.push({ field, message: 'must be an ISO 8601 time or date, or Unix seconds' });
      return undefined;
    }
    return new Date(ms);
  };
  const now = new Date();
  const from = parse(rawFrom, 'from') ?? new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const to = parse(rawTo, 'to') ?? now;
  if (problems.length === 0 && from >= to) problems.push({ field: 'to', message: 'must be after from' });
  if (problems.length) throw ApiError.badRequest(problems.map((p) => `${p.field} ${p.message}`).join('; '), { fields: problems });
  return { from, to };
}
