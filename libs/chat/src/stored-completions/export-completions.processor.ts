import { Injectable, Logger } from '@nestjs/common';
import { ApiError, COMPLETION_EXPORT_QUEUE, USER_EVENTS_CHANNEL, type CompletionExportJob } from '@atelier/contracts';
import { RepositoriesService } from '@atelier/repos';
import { BroadcastBus, errorSummary, HandlesQueue, UserEventLog, type JobContext, type JobHandler } from '@atelier/runtime';
import { CompletionExportsRepository, type CompletionExportRow } from './completion-exports.repository';
import { ExportCompletions, exportObject } from './export-completions.use-case';

/**
 * Runs a queued export (ExportCompletions): running with its progress kept after each page, then
 * completed with the commit, or failed with why; then an `export.status` event in its owner's
 * stream. A retry after a crash starts the export again, unless it had ended, when it only
 * publishes the event it owed (retained once: the event's outbox id is the export's).
 */
@Injectable()
@HandlesQueue(COMPLETION_EXPORT_QUEUE)
export class CompletionExportJobs implements JobHandler<typeof COMPLETION_EXPORT_QUEUE> {
  private readonly logger = new Logger(CompletionExportJobs.name);

  constructor(
    private readonly exports: CompletionExportsRepository,
    private readonly exporter: ExportCompletions,
    private readonly repos: RepositoriesService,
    private readonly events: UserEventLog,
    private readonly bus: BroadcastBus,
  ) {}

  async handle(job: CompletionExportJob, ctx: JobContext): Promise<void> {
    const row = await this.exports.byId(job.exportId);
    if (!row) return;
    if (row.status === 'queued' || row.status === 'running') {
      if (!(await this.exports.start(row.id))) return;
      try {
        const repo = await this.repos.find(row.namespaceId, row.namespace, row.repo);
        const filter = await this.exporter.filterOf({ id: row.namespaceId, name: row.namespace }, row.filter);
        const result = await this.exporter.write(row.namespaceId, row.namespace, repo, row.branch, row.path, filter, row.filter, { userId: row.userId, username: row.username }, (rows, skipped) =>
          this.exports.progress(row.id, rows, skipped),
        );
        await this.exports.end(row.id, { status: 'completed', ...result });
      } catch (err) {
        // The request's own problems (the repo went away, nothing left to write) end it; an outage is
        // retried, and ends it only on the last attempt.
        if (!(err instanceof ApiError) && ctx.attempt < (ctx.job.opts.attempts ?? 1)) throw err;
        await this.exports.end(row.id, { status: 'failed', error: err instanceof ApiError ? err.message : `The export failed: ${errorSummary(err)}` });
      }
    }
    const ended = await this.exports.byId(row.id);
    if (ended && !ended.eventPublishedAt && (ended.status === 'completed' || ended.status === 'failed')) await this.publish(ended);
  }

  private async publish(row: CompletionExportRow): Promise<void> {
    const data = exportObject(row);
    const outboxId = `export:${row.id}`;
    const eventId = await this.events.append(row.userId, { userId: row.userId, type: 'export.status', data, outboxId }, outboxId);
    await this.bus.publish(USER_EVENTS_CHANNEL, { userId: row.userId, type: 'export.status', data, event_id: eventId });
    await this.exports.published(row.id);
    this.logger.log(`export ${data.id} ${row.status}: ${row.rows} rows`);
  }
}

