import { Readable } from 'node:stream';
import { Injectable } from '@nestjs/common';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { NamespaceAccess, type Caller } from '@atelier/auth';
import { ApiError, EXPORT_MAX_ROWS, ExportCompletionsRequest, type UploadItem } from '@atelier/contracts';
import { DEFAULT_BRANCH, RepositoriesService } from '@atelier/repos';
import { parseBody } from '@atelier/runtime';
import { invalid } from '../chat-request';
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

/**
 * POST /api/ai/chat/completions/export: the stored completions of a namespace that match a filter,
 * written as a Parquet file (`messages`: the conversation as text_chat_messages reads it;
 * `completion_id`; `model`) and committed to a repo of that namespace, with the count and the filter
 * in the commit message. A fine-tune with `messages_column: "messages"` trains on it unchanged.
 * Runs inside the request, for at most EXPORT_MAX_ROWS completions.
 */
@Injectable()
export class ExportCompletions {
  constructor(
    private readonly rows: StoredCompletionsRepository,
    private readonly feedback: FeedbackRepository,
    private readonly repos: RepositoriesService,
    private readonly access: NamespaceAccess,
  ) {}

  async run(caller: Caller, body: unknown) {
    const request = parseBody(ExportCompletionsRequest, body);
    // The route asks for the repos scope; reading the traffic needs chat as well.
    if (caller.scopes && caller.scopes.length > 0 && !caller.scopes.includes('chat')) throw ApiError.forbidden(`This API key lacks the 'chat' scope (it has: ${caller.scopes.join(', ')})`);
    const scope = await this.access.resolve(caller, request.namespace);
    const repo = await this.repos.find(scope.id, scope.name, request.repo);
    const f = request.filter ?? {};
    const filter: StoredCompletionFilter = { model: f.model, metadata: f.metadata, ...(f.since !== undefined && { since: new Date(f.since * 1000) }) };
    if (f.metric !== undefined) {
      const metric = await this.feedback.metric(scope.id, f.metric);
      if (!metric) throw invalid([{ field: 'filter.metric', message: `filter.metric: no feedback metric '${f.metric}' in namespace ${scope.name}` }]);
      filter.metricId = metric.id;
      filter.minValue = f.min_value;
    }

    const ids: string[] = [];
    const models: string[] = [];
    const conversations: string[] = [];
    let skipped = 0;
    let after: string | undefined;
    for (;;) {
      const page = await this.rows.list(scope.id, filter, { after, limit: PAGE, order: 'asc' });
      for (const row of page.slice(0, PAGE)) {
        if (ids.length + skipped >= EXPORT_MAX_ROWS)
          throw invalid([{ field: 'filter', message: `More than ${EXPORT_MAX_ROWS} stored completions match; narrow the filter (since, model, metadata, metric) and export in parts` }]);
        const conversation = trainingConversation(row);
        if (!conversation) {
          skipped++;
          continue;
        }
        ids.push(row.id);
        models.push(row.model);
        conversations.push(JSON.stringify(conversation));
      }
      if (page.length <= PAGE) break;
      after = page[PAGE - 1].id;
    }
    if (ids.length === 0)
      throw invalid([{ field: 'filter', message: `No stored completion of namespace ${scope.name} matches the filter${skipped > 0 ? ` as text (${skipped} hold tool calls, images or no answer)` : ''}; nothing was written` }]);

    const file = Buffer.from(
      parquetWriteBuffer({
        columnData: [
          { name: 'messages', data: conversations, type: 'STRING' },
          { name: 'completion_id', data: ids, type: 'STRING' },
          { name: 'model', data: models, type: 'STRING' },
        ],
      }),
    );
    const slash = request.path.lastIndexOf('/');
    const directory = slash < 0 ? '' : request.path.slice(0, slash);
    const filename = request.path.slice(slash + 1);
    const message = `Export ${ids.length} stored completion${ids.length === 1 ? '' : 's'} (filter ${JSON.stringify(f)}${skipped > 0 ? `; ${skipped} not text-only, left out` : ''})`;
    const items = (async function* (): AsyncGenerator<UploadItem> {
      yield { kind: 'field', name: 'message', value: message };
      yield { kind: 'file', fieldname: 'file', filename, mimetype: 'application/vnd.apache.parquet', stream: Readable.from([file]), truncated: () => false };
    })();
    const commit = await this.repos.upload(repo, request.branch ?? DEFAULT_BRANCH, directory, items, { userId: caller.userId, username: caller.username });
    return { object: 'chat.completion.export', namespace: scope.name, repo: repo.name, path: request.path, rows: ids.length, skipped, filter: f, commit };
  }
}
