import { Inject, Injectable, Logger } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { NamespaceAccess, type Caller } from '@atelier/auth';
import { ApiError, Metadata, UpdateStoredCompletionRequest } from '@atelier/contracts';
import { errorSummary, parseBody } from '@atelier/runtime';
import { invalid } from '../chat-request';
import type { ListPage } from '../list-page';
import { FeedbackRepository } from './feedback.repository';
import { StoredCompletionsRepository, type FeedbackRow, type StoredCompletionFilter, type StoredCompletionRow } from './stored-completions.repository';

const DAY_MS = 24 * 3600 * 1000;

/** What the chat lifecycle hands over for an answer to keep: the row, and the request it answered. */
export type CompletionToKeep = Omit<StoredCompletionRow, 'createdAt'> & { requestId: string };

export interface StoredCompletionQuery {
  namespace?: string;
  model?: string;
  metadata?: Record<string, string>;
  metric?: string;
  minValue?: number;
  page: ListPage;
}

/** One feedback as the API shows it (a boolean metric's value as 1 or 0). */
export function feedbackView(f: Pick<FeedbackRow, 'id' | 'targetId' | 'metric' | 'value' | 'comment' | 'createdAt'>) {
  return { id: f.id, object: 'feedback' as const, target_id: f.targetId, metric: f.metric, value: f.value, comment: f.comment, created_at: Math.floor(f.createdAt.getTime() / 1000) };
}

/**
 * OpenAI's Stored Completions on atelier's namespaces: chat completions kept with store: true (or
 * the namespace's capture_rate), listed, read with their messages, re-labelled and deleted through
 * the same routes and shapes, so the SDK's client.chat.completions.list() and friends work. Each
 * one carries the feedback given on it (atelier's `feedback` field).
 */
@Injectable()
export class StoredCompletions {
  private readonly logger = new Logger(StoredCompletions.name);

  constructor(
    private readonly rows: StoredCompletionsRepository,
    private readonly feedback: FeedbackRepository,
    private readonly access: NamespaceAccess,
    @Inject(APP_CONFIG) private readonly config: Pick<AppConfig, 'STORED_COMPLETIONS_TTL_DAYS'>,
  ) {}

  /** Never throws: the answer has gone out and been charged; a lost write is logged, not the caller's failure. */
  async keep(c: CompletionToKeep): Promise<void> {
    try {
      const completion = { ...c.completion, id: c.id, request_id: c.requestId };
      await this.rows.insert({ ...c, completion, expiresAt: new Date(Date.now() + this.config.STORED_COMPLETIONS_TTL_DAYS * DAY_MS) });
    } catch (err) {
      this.logger.warn(`Storing chat completion ${c.id} failed: ${errorSummary(err)}`);
    }
  }

  async list(caller: Caller, query: StoredCompletionQuery): Promise<Record<string, unknown>> {
    const scope = await this.access.resolve(caller, query.namespace ?? caller.namespace);
    const filter: StoredCompletionFilter = { model: query.model, metadata: query.metadata };
    if (query.metric !== undefined) {
      const metric = await this.feedback.metric(scope.id, query.metric);
      if (!metric) throw invalid([{ field: 'metric', message: `metric: no feedback metric '${query.metric}' in namespace ${scope.name}` }]);
      filter.metricId = metric.id;
      filter.minValue = query.minValue;
    }
    if (query.page.after !== undefined && !(await this.rows.exists(scope.id, query.page.after)))
      throw invalid([{ field: 'after', message: `after: no stored chat completion '${query.page.after}' in namespace ${scope.name}` }]);
    const rows = await this.rows.list(scope.id, filter, query.page);
    const page = rows.slice(0, query.page.limit);
    const data = await this.withFeedback(page);
    return { object: 'list', data, first_id: page[0]?.id ?? null, last_id: page.at(-1)?.id ?? null, has_more: rows.length > query.page.limit };
  }

  async get(caller: Caller, id: string): Promise<Record<string, unknown>> {
    const [view] = await this.withFeedback([await this.readable(caller, id)]);
    return view;
  }

  /** The request's messages, oldest first by default (OpenAI's), paged by message id. */
  async messages(caller: Caller, id: string, page: ListPage): Promise<Record<string, unknown>> {
    const row = await this.readable(caller, id);
    const ordered = page.order === 'asc' ? row.messages : [...row.messages].reverse();
    const from = page.after === undefined ? 0 : ordered.findIndex((m) => m.id === page.after) + 1;
    if (page.after !== undefined && from === 0) throw invalid([{ field: 'after', message: `after: no message '${page.after}' in chat completion ${id}` }]);
    const data = ordered.slice(from, from + page.limit);
    return { object: 'list', data, first_id: (data[0]?.id as string) ?? null, last_id: (data.at(-1)?.id as string) ?? null, has_more: from + page.limit < ordered.length };
  }

  /** OpenAI's update: the metadata replaced as a whole (null clears it). */
  async update(caller: Caller, id: string, body: unknown): Promise<Record<string, unknown>> {
    const { metadata } = parseBody(UpdateStoredCompletionRequest, body);
    const row = await this.readable(caller, id);
    await this.rows.setMetadata(row.id, metadata ?? {});
    return this.get(caller, id);
  }

  async delete(caller: Caller, id: string): Promise<{ id: string; object: 'chat.completion.deleted'; deleted: true }> {
    const row = await this.readable(caller, id);
    if (!(await this.rows.delete(row.id))) throw notFound(id);
    return { id, object: 'chat.completion.deleted', deleted: true };
  }

  /** A live completion the caller may read; anything else (another namespace's included) is the same 404. */
  async readable(caller: Caller, id: string): Promise<StoredCompletionRow> {
    const row = await this.rows.byId(id);
    if (!row || !(await this.access.canAccess(caller, row.namespaceId))) throw notFound(id);
    return row;
  }

  private async withFeedback(rows: StoredCompletionRow[]): Promise<Record<string, unknown>[]> {
    const feedback = await this.rows.feedbackOn(rows.map((r) => r.id));
    return rows.map((r) => ({
      ...r.completion,
      metadata: r.metadata,
      feedback: feedback.filter((f) => f.completionId === r.id).map(feedbackView),
    }));
  }
}

function notFound(id: string): ApiError {
  return new ApiError('resource_not_found', `No chat completion found with id '${id}'`);
}

/** `metadata[key]=value` query parameters (how the SDK sends the metadata filter), checked as metadata is. */
export function metadataFilter(query: Record<string, unknown>): Record<string, string> | undefined {
  const pairs = Object.entries(query).flatMap(([k, v]) => {
    const m = /^metadata\[(.+)\]$/.exec(k);
    return m ? [[m[1], v] as const] : [];
  });
  if (pairs.length === 0) return undefined;
  const parsed = Metadata.safeParse(Object.fromEntries(pairs));
  if (!parsed.success) throw invalid(parsed.error.issues.map((i) => ({ field: 'metadata', message: `metadata: ${i.message}` })));
  return parsed.data;
}
