import { Controller, Get, Query, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { CurrentCaller, NamespaceAccess, type Caller } from '@atelier/auth';
import { usageCsv, UsageReports, type UsageQuery, type UsageReport } from './usage-report.service';
import { ApiError } from '@atelier/contracts';

type UsageParams = UsageQuery & { namespace?: unknown; format?: unknown };

/** Sends the report as JSON, or with format=csv its rows as a CSV download. */
export async function sendUsage(reply: FastifyReply, report: UsageReport, format: unknown): Promise<void> {
  if (format === undefined || format === 'json') {
    await reply.send(report);
    return;
  }
  if (format !== 'csv') throw ApiError.badRequest('format must be json or csv', { fields: [{ field: 'format', message: 'must be json or csv' }] });
  const name = `usage-${report.namespace ?? 'all'}-${report.group_by}-${report.from.slice(0, 10)}-${report.to.slice(0, 10)}.csv`.replace(/[^\w.-]/g, '_');
  await reply.header('content-type', 'text/csv; charset=utf-8').header('content-disposition', `attachment; filename="${name}"`).send(usageCsv(report));
}

/** GET /api/usage: usage and spend of a namespace the caller belongs to (own by default). */
@Controller('api/usage')
export class UsageController {
  constructor(
    private readonly reports: UsageReports,
    private readonly access: NamespaceAccess,
  ) {}

  @Get()
  async usage(@CurrentCaller() caller: Caller, @Query() query: UsageParams, @Res() reply: FastifyReply): Promise<void> {
    const scope = await this.access.resolve(caller, query.namespace);
    await sendUsage(reply, await this.reports.report(scope, query), query.format);
  }
}
