import { Injectable, Logger } from '@nestjs/common';
import { NamespaceAccess, type Caller } from '@atelier/auth';
import { ApiError } from '@atelier/contracts';
import { randomToken } from '@atelier/random';
import { errorSummary, toErrorResponse } from '@atelier/runtime';
import { ChatCompletionsService } from '../chat-completions.service';
import type { ChatCompletion } from '../chat-types';
import { completionOutput, finishResponse, ResponseEventStream, responseShell, type ResponseEvent, type ResponseObject } from './response-output';
import { ResponseStore } from './response-store.service';
import { translateResponsesRequest, type ResponseItem } from './responses-request';

/** The route Responses usage is reported under (GET /api/usage?group_by=endpoint). */
const RESPONSES_ENDPOINT = '/api/ai/responses';

/** How the caller's transport receives a Response (the controller speaks HTTP/SSE). */
export interface ResponsesDelivery {
  signal: AbortSignal;
  header(name: string, value: string): void;
  /** One event of a stream (the first opens it). */
  event(event: ResponseEvent & { sequence_number: number }): void;
  /** The end of a stream. */
  end(): void;
  /** A whole (non-streamed) Response. */
  json(response: ResponseObject): Promise<void>;
}

/** Chat's field names in a refusal, as the Responses request names them. */
const RESPONSES_NAMES: [RegExp, string][] = [
  [/\bmax_completion_tokens\b/g, 'max_output_tokens'],
  [/\bresponse_format\.json_schema\b/g, 'text.format'],
  [/\bresponse_format\b/g, 'text.format'],
  [/\bmessages\b/g, 'input'],
];

function inResponsesTerms(err: unknown): unknown {
  if (!(err instanceof ApiError) || err.type !== 'invalid_request') return err;
  const rename = (text: string) => RESPONSES_NAMES.reduce((t, [from, to]) => t.replace(from, to), text);
  const detail = err.detail as { fields?: { field: string; message: string }[] } | undefined;
  const fields = detail?.fields?.map((f) => ({ field: rename(f.field), message: rename(f.message) }));
  return new ApiError('invalid_request', rename(err.message), fields ? { ...detail, fields } : err.detail);
}

/**
 * POST /api/ai/responses on the chat lifecycle: the Responses body becomes a chat body (with
 * the stored conversation of previous_response_id in front), runs through
 * ChatCompletionsService (validation, token limits, the credit reservation, the hand-off,
 * retries and fallbacks, the settle), and its answer or stream comes back as a Response or
 * the Responses stream's events. Usage is reported under /api/ai/responses.
 */
@Injectable()
export class ResponsesService {
  private readonly logger = new Logger(ResponsesService.name);

  constructor(
    private readonly chat: ChatCompletionsService,
    private readonly store: ResponseStore,
    private readonly access: NamespaceAccess,
  ) {}

  async create(caller: Caller, rawBody: unknown, requestId: string, delivery: ResponsesDelivery): Promise<void> {
    if (rawBody === null || typeof rawBody !== 'object' || Array.isArray(rawBody)) throw ApiError.badRequest('Request body must be a JSON object');
    const body = rawBody as Record<string, unknown>;
    const scope = await this.access.resolve(caller, body.target_namespace);
    let history: ResponseItem[] = [];
    const previous = body.previous_response_id;
    if (previous !== undefined && previous !== null) {
      if (typeof previous !== 'string') throw ApiError.badRequest('previous_response_id must be a string', { fields: [{ field: 'previous_response_id', message: 'previous_response_id must be a string' }] });
      // The same namespace only: a conversation is continued where it is billed.
      const stored = await this.store.get(previous, async (ns) => ns === scope.id, 'previous_response_id');
      history = [...stored.inputItems, ...stored.response.output];
    }
    const translated = translateResponsesRequest(body, history);
    if (translated.droppedTools.length > 0) delivery.header('x-atelier-dropped-tools', translated.droppedTools.join(', '));
    const shell = responseShell(`resp_${randomToken(24)}`, body, translated.store);
    const inputItems = [...history, ...translated.inputItems];
    const keep = async (response: ResponseObject): Promise<ResponseObject> => {
      if (!translated.store) return response;
      try {
        await this.store.save(scope.id, caller.userId, response, inputItems);
        return response;
      } catch (err) {
        // The answer is paid for and goes out; it says it was not stored rather than failing.
        this.logger.warn(`Storing response ${response.id} failed: ${errorSummary(err)}`);
        return { ...response, store: false };
      }
    };

    const events = new ResponseEventStream(shell, translated.tools, (event) => delivery.event(event));
    let started = false;
    let ended = false;
    const start = () => {
      if (started) return;
      started = true;
      events.start();
    };
    try {
      await this.chat.create(
        caller,
        translated.chatBody,
        requestId,
        {
          signal: delivery.signal,
          header: (name, value) => delivery.header(name, value),
          chunk: (data) => {
            start();
            events.chunk(data);
          },
          deliver: async (completion) => {
            if (completion === null) {
              start();
              const response = await keep(events.finish());
              events.complete(response);
              ended = true;
              delivery.end();
              return;
            }
            const { output, finishReason } = completionOutput(completion as ChatCompletion, translated.tools);
            const response = finishResponse({ ...shell, model: completion.model ?? shell.model }, output, (completion as ChatCompletion).usage, finishReason);
            await delivery.json(await keep(response));
          },
        },
        RESPONSES_ENDPOINT,
      );
    } catch (err) {
      // Before the stream opened, an ordinary HTTP error; after, response.failed ends it (never a clean end).
      if (!started) throw inResponsesTerms(err);
      if (!ended && !delivery.signal.aborted) events.fail(toErrorResponse(err).body.error);
      if (!ended) delivery.end();
    }
  }

  get(caller: Caller, id: string): Promise<ResponseObject> {
    return this.store.get(id, (ns) => this.access.canAccess(caller, ns)).then((stored) => stored.response);
  }

  async delete(caller: Caller, id: string): Promise<{ id: string; object: 'response'; deleted: true }> {
    await this.store.delete(id, (ns) => this.access.canAccess(caller, ns));
    return { id, object: 'response', deleted: true };
  }

  /** OpenAI's input_items list: newest first by default, paged with after and limit. */
  async inputItems(caller: Caller, id: string, query: { after?: string; limit: number; order: 'asc' | 'desc' }): Promise<Record<string, unknown>> {
    const { inputItems } = await this.store.get(id, (ns) => this.access.canAccess(caller, ns));
    const ordered = query.order === 'asc' ? inputItems : [...inputItems].reverse();
    const from = query.after === undefined ? 0 : ordered.findIndex((item) => item.id === query.after) + 1;
    if (query.after !== undefined && from === 0) throw ApiError.badRequest(`after: no input item '${query.after}' in response ${id}`, { fields: [{ field: 'after', message: `no input item '${query.after}'` }] });
    const data = ordered.slice(from, from + query.limit);
    return { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: from + query.limit < ordered.length };
  }
}
