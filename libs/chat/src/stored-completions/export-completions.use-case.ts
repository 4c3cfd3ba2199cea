import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Injectable } from '@nestjs/common';
import { fileWriter, ParquetWriter, schemaFromColumnData } from 'hyparquet-writer';
import { NamespaceAccess, type Caller, type NamespaceScope } from '@atelier/auth';
import { ApiError, COMPLETION_EXPORT_QUEUE, EXPORT_MAX_QUEUED_ROWS, EXPORT_MAX_ROWS, ExportCompletionsRequest, type UploadItem } from '@atelier/contracts';
import { randomToken } from '@atelier/random';
import { DEFAULT_BRANCH, RepositoriesService, type RepositoryRecord } from '@atelier/repos';
import { JobQueues, parseBody } from '@atelier/runtime';
import { invalid } from '../chat-request';
import { CompletionExportsRepository, type CompletionExportRow } from './completion-exports.repository';
import { FeedbackRepository } from './feedback.repository';
import { StoredCompletionsRepository, type StoredCompletionFilter, type StoredCompletionRow } from './stored-completions.repository';

/** Read this many at a time while collecting an export. */
const PAGE = 1000;

type TrainingMessage = { role: string; content: string };

/** A message's text: a string, or text parts joined; undefined when it holds anything else (images, audio, none). */
function textOf(content: unknown): string | undefined {
  if (typeof content === 'string') return content;
  if (Array.isArray(content) && content.every((p: { type?: unknown; text?: unknown }) => p?.type === 'text' && typeof p.text === 'string'))
    return content.map((p: { text: string }) => p.text).join('');
  return undefined;
}

/**
 * One stored completion as a training conversation: the request's messages and the answer, in the
 * layout the fine-tune text_chat_messages script type reads (a JSON list of {role, content}).
 * Undefined when it cannot be trained on as text: tool calls or results, images, an empty answer.
 */
export function trainingConversation(row: Pick<StoredCompletionRow, 'messages' | 'completion'>): TrainingMessage[] | undefined {
  const messages: TrainingMessage[] = [];
  for (const m of row.messages) {
    const content = textOf(m.content);
    if (content === undefined || !['system', 'developer', 'user', 'assistant'].includes(String(m.role)) || m.tool_calls) return undefined;
    messages.push({ role: String(m.role), content });
  }
  const answer = (row.completion.choices as { message?: { content?: unknown; tool_calls?: unknown[] } }[] | undefined)?.[0]?.message;
  const content = textOf(answer?.content);
  if (content === undefined || content.trim() === '' || (answer?.tool_calls?.length ?? 0) > 0) return undefined;
  return [...messages, { role: 'assistant', content }];
}

/** The request's filter as given (the commit message and the export object repeat it). */
type ExportFilter = NonNullable<ExportCompletionsRequest['filter']>;

/** What a written export committed. */
interface ExportResult {
  rows: number;
  skipped: number;
  commit: Record<string, unknown>;
}

const unix = (d: Date | null) => (d ? Math.floor(d.getTime() / 1000) : null);

/** A queued export as GET /api/ai/chat/completions/exports/{id} and its export.status event show it. */
export function exportObject(e: CompletionExportRow) {
  return {
    id: `export_${e.id.replace(/-/g, '')}`,
    object: 'chat.completion.export' as const,
    status: e.status,
    namespace: e.namespace,
    repo: e.repo,
    path: e.path,
    branch: e.branch,
    filter: e.filter,
    progress: { rows: e.rows, skipped: e.skipped, total: e.total },
    rows: e.rows,
    skipped: e.skipped,
    commit: e.commit,
    error: e.error,
    created_at: unix(e.createdAt),
    started_at: unix(e.startedAt),
    ended_at: unix(e.endedAt),
  };
}

/** export_<32 hex> back to the row's uuid; undefined for anything else. */
export function exportRowId(id: string): string | undefined {
  const m = /^export_([0-9a-f]{8})([0-9a-f]{4})([0-9a-f]{4})([0-9a-f]{4})([0-9a-f]{12})$/.exec(id);
  return m ? m.slice(1).join('-') : undefined;
}

/**
 * POST /api/ai/chat/completions/export: the stored completions of a namespace that match a filter,
 * written as a Parquet file (`messages`: the conversation as text_chat_messages reads it;
 * `completion_id`; `model`) and committed to a repo of that namespace, with the count and the filter
 * in the commit message. A fine-tune with `messages_column: "messages"` trains on it unchanged.
 * Up to EXPORT_MAX_ROWS completions it runs inside the request; past that (or with `background:
 * true`) it is queued (202) on the completion-export queue, with its progress readable and an
 * `export.status` event when it ends. Either way it is written a page at a time to a temporary
 * file, so memory does not grow with the export.
 */
@Injectable()
export class ExportCompletions {
  constructor(
    private readonly rows: StoredCompletionsRepository,
    private readonly feedback: FeedbackRepository,
    private readonly repos: RepositoriesService,
    private readonly access: NamespaceAccess,
    private readonly exports: CompletionExportsRepository,
    private readonly queues: JobQueues,
  ) {}

  /** `queued`: the 202 of a queued export (its object), else the finished export (200). */
  async run(caller: Caller, body: unknown, requestId: string): Promise<{ queued: boolean; body: Record<string, unknown> }> {
    const request = parseBody(ExportCompletionsRequest, body);
    // The route asks for the repos scope; reading the traffic needs chat as well.
    if (caller.scopes && caller.scopes.length > 0 && !caller.scopes.includes('chat')) throw ApiError.forbidden(`This API key lacks the 'chat' scope (it has: ${caller.scopes.join(', ')})`);
    const scope = await this.access.resolve(caller, request.namespace);
    const repo = await this.repos.find(scope.id, scope.name, request.repo);
    const f = request.filter ?? {};
    const filter = await this.filterOf(scope, f);
    const branch = request.branch ?? DEFAULT_BRANCH;
    const total = await this.rows.count(scope.id, filter, EXPORT_MAX_QUEUED_ROWS + 1);
    if (total === 0) throw invalid([{ field: 'filter', message: `No stored completion of namespace ${scope.name} matches the filter; nothing was written` }]);
    if (total > EXPORT_MAX_QUEUED_ROWS)
      throw invalid([{ field: 'filter', message: `More than ${EXPORT_MAX_QUEUED_ROWS} stored completions match; narrow the filter (since, model, metadata, metric) and export in parts` }]);
    if (request.background || total > EXPORT_MAX_ROWS) {
      const row = await this.exports.create({ namespaceId: scope.id, userId: caller.userId, username: caller.username, repo: repo.name, path: request.path, branch, filter: f, total });
      await this.queues.add(COMPLETION_EXPORT_QUEUE, { exportId: row.id, requestId }, { jobId: row.id });
      return { queued: true, body: exportObject(row) };
    }
    const result = await this.write(scope.id, scope.name, repo, branch, request.path, filter, f, { userId: caller.userId, username: caller.username });
    return { queued: false, body: { object: 'chat.completion.export', status: 'completed', namespace: scope.name, repo: repo.name, path: request.path, ...result, filter: f } };
  }

  /** A queued export of the caller's namespaces; another namespace's is 404. */
  async get(caller: Caller, id: string) {
    const rowId = exportRowId(id);
    const row = rowId ? await this.exports.byId(rowId) : undefined;
    if (!row || !(await this.access.canAccess(caller, row.namespaceId))) throw new ApiError('resource_not_found', `No export found with id '${id.replace(/\0/g, '')}'`);
    return exportObject(row);
  }

  async filterOf(scope: Pick<NamespaceScope, 'id' | 'name'>, f: ExportFilter): Promise<StoredCompletionFilter> {
    const filter: StoredCompletionFilter = { model: f.model, metadata: f.metadata, ...(f.since !== undefined && { since: new Date(f.since * 1000) }) };
    if (f.metric !== undefined) {
      const metric = await this.feedback.metric(scope.id, f.metric);
      if (!metric) throw invalid([{ field: 'filter.metric', message: `filter.metric: no feedback metric '${f.metric}' in namespace ${scope.name}` }]);
      filter.metricId = metric.id;
      filter.minValue = f.min_value;
    }
    return filter;
  }

  /**
   * Writes the matching completions to a temporary Parquet file a page (one row group) at a time,
   * then commits it. `progress` hears the counts after each page. Throws a 400 when none is text.
   */
  async write(
    namespaceId: string,
    namespace: string,
    repo: RepositoryRecord,
    branch: string,
    filePath: string,
    filter: StoredCompletionFilter,
    given: ExportFilter,
    author: { userId: string; username: string },
    progress?: (rows: number, skipped: number) => Promise<void>,
  ): Promise<ExportResult> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'atelier-export-'));
    const file = path.join(dir, `${randomToken(8)}.parquet`);
    try {
      const columns = (messages: string[], ids: string[], models: string[]) => [
        { name: 'messages', data: messages, type: 'STRING' as const },
        { name: 'completion_id', data: ids, type: 'STRING' as const },
        { name: 'model', data: models, type: 'STRING' as const },
      ];
      const writer = new ParquetWriter({ writer: fileWriter(file), schema: schemaFromColumnData({ columnData: columns([], [], []) }) });
      let rows = 0;
      let skipped = 0;
      let after: string | undefined;
      for (;;) {
        const page = await this.rows.list(namespaceId, filter, { after, limit: PAGE, order: 'asc' });
        const conversations: string[] = [];
        const ids: string[] = [];
        const models: string[] = [];
        for (const row of page.slice(0, PAGE)) {
          const conversation = trainingConversation(row);
          if (!conversation) {
            skipped++;
            continue;
          }
          conversations.push(JSON.stringify(conversation));
          ids.push(row.id);
          models.push(row.model);
        }
        if (ids.length > 0) writer.write({ columnData: columns(conversations, ids, models), rowGroupSize: PAGE });
        rows += ids.length;
        await progress?.(rows, skipped);
        if (page.length <= PAGE) break;
        after = page[PAGE - 1].id;
      }
      writer.finish();
      if (rows === 0)
        throw invalid([{ field: 'filter', message: `No stored completion of namespace ${namespace} matches the filter as text (${skipped} hold tool calls, images or no answer); nothing was written` }]);
      const slash = filePath.lastIndexOf('/');
      const directory = slash < 0 ? '' : filePath.slice(0, slash);
      const filename = filePath.slice(slash + 1);
      const message = `Export ${rows} stored completion${rows === 1 ? '' : 's'} (filter ${JSON.stringify(given)}${skipped > 0 ? `; ${skipped} not text-only, left out` : ''})`;
      const items = (async function* (): AsyncGenerator<UploadItem> {
        yield { kind: 'field', name: 'message', value: message };
        yield { kind: 'file', fieldname: 'file', filename, mimetype: 'application/vnd.apache.parquet', stream: fs.createReadStream(file), truncated: () => false };
      })();
      const commit = await this.repos.upload(repo, branch, directory, items, author);
      return { rows, skipped, commit: commit as unknown as Record<string, unknown> };
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
}
