import { Injectable } from '@nestjs/common';
import { ADMIN_USAGE_GROUPS, ApiError, parseApiInstant, USAGE_GROUPS, type UsageFigures, type UsageGroup, type UsageReport, type UsageRow } from '@atelier/contracts';
import { Prisma } from '@atelier/db';
import { UsageRepository } from './usage.repository';

// The report's shapes are the API's (libs/contracts); a row's `group` is the model, key prefix, UTC day
// (YYYY-MM-DD), endpoint or namespace, null when not recorded (work settled before usage reporting).
export { ADMIN_USAGE_GROUPS, USAGE_GROUPS, type UsageGroup, type UsageReport, type UsageRow };

export interface UsageQuery {
  from?: unknown;
  to?: unknown;
  group_by?: unknown;
  split_by?: unknown;
}

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
  constructor(private readonly usage: UsageRepository) {}

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
    const rows = await this.usage.sums(namespace?.id, from, to, groupBy, splitBy);
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
