import { Injectable, Logger } from '@nestjs/common';
import { NamespaceAccess, type Caller, type NamespaceScope } from '@atelier/auth';
import { ApiError } from '@atelier/contracts';
import { randomToken } from '@atelier/random';
import { errorSummary, toErrorResponse } from '@atelier/runtime';
import { ChatCompletionsService } from '../chat-completions.service';
import type { ChatCompletion } from '../chat-types';
import type { ChatModelDefinition } from '@atelier/models';
import { completionOutput, finishResponse, outputText, ResponseEventStream, responseShell, type ResponseEvent, type ResponseObject } from './response-output';
import { ResponsesRepository } from './responses.repository';
import { fieldError, translateResponsesRequest, type ResponseItem } from './responses-request';

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

/** A request checked by ResponsesService.prepare, ready to run. */
export interface PreparedResponse {
  body: Record<string, unknown>;
  scope: NamespaceScope;
  history: ResponseItem[];
  chainBytes: number;
  translated: ReturnType<typeof translateResponsesRequest>;
  newItemsJson: string;
}

/** A background response's run: its stored shell, and where its answer goes. */
export interface BackgroundRun {
  shell: ResponseObject;
  keep(response: ResponseObject): Promise<ResponseObject>;
}

/** Chat's field names in a refusal, as the Responses request names them. */
const RESPONSES_NAMES: [RegExp, string][] = [
  [/\bmax_completion_tokens\b/g, 'max_output_tokens'],
  [/\bresponse_format\.json_schema\b/g, 'text.format'],
  [/\bresponse_format\b/g, 'text.format'],
  [/\bmessages\b/g, 'input'],
];

export function inResponsesTerms(err: unknown): unknown {
  if (!(err instanceof ApiError) || err.type !== 'invalid_request') return err;
  const rename = (text: string) => RESPONSES_NAMES.reduce((t, [from, to]) => t.replace(from, to), text);
  const detail = err.detail as { fields?: { field: string; message: string }[] } | undefined;
  const fields = detail?.fields?.map((f) => ({ field: rename(f.field), message: rename(f.message) }));
  return new ApiError('invalid_request', rename(err.message), fields ? { ...detail, fields } : err.detail);
}

/** Fields that are atelier's, or answered by atelier rather than the upstream. */
const NOT_FORWARDED = new Set(['previous_response_id', 'target_namespace', 'store', 'stream']);

/** Tools a caller defines and runs itself: never the operator's account's. */
const CALLER_TOOLS = new Set(['function', 'custom', 'namespace']);

/**
 * The request for an upstream that speaks /responses: the caller's, with the conversation of
 * previous_response_id in front of its input (atelier keeps it; the upstream stores nothing), and
 * reasoning's encrypted content asked for when the caller uses reasoning, so it survives the turn.
 * Item ids are dropped but for reasoning items': an upstream that stores nothing knows no ids.
 * Hosted tools run on the operator's account: only those the catalog entry lists (responses_tools)
 * go; and max_output_tokens is always the reserved limit, so the answer stays within what was paid.
 */
function upstreamResponsesBody(
  body: Record<string, unknown>,
  history: readonly ResponseItem[],
  limits: { maxOutputTokens: number; hostedTools: readonly string[]; dropped: (type: string) => void },
): Record<string, unknown> {
  const forwarded = Object.fromEntries(Object.entries(body).filter(([field]) => !NOT_FORWARDED.has(field)));
  forwarded.max_output_tokens = limits.maxOutputTokens;
  if (Array.isArray(body.tools)) {
    const allowed = (tool: unknown) => {
      const type = (tool as { type?: unknown })?.type;
      if (typeof type === 'string' && (CALLER_TOOLS.has(type) || limits.hostedTools.includes(type))) return true;
      limits.dropped(String(type));
      return false;
    };
    forwarded.tools = body.tools.filter(allowed);
    const choice = body.tool_choice as { type?: unknown } | undefined;
    if (choice && typeof choice === 'object' && typeof choice.type === 'string' && !CALLER_TOOLS.has(choice.type) && choice.type !== 'allowed_tools' && !limits.hostedTools.includes(choice.type))
      throw fieldError('tool_choice', `tool_choice forces the hosted tool '${choice.type}', which this model does not run for callers`);
  }
  if (history.length > 0) {
    const input = typeof body.input === 'string' ? [{ role: 'user', content: body.input }] : (body.input as unknown[]);
    forwarded.input = [...history.map(({ id, ...item }) => (item.type === 'reasoning' ? { id, ...item } : item)), ...input];
  }
  if (body.reasoning !== undefined && body.reasoning !== null) {
    const include = Array.isArray(body.include) ? (body.include as unknown[]) : [];
    if (!include.includes('reasoning.encrypted_content')) forwarded.include = [...include, 'reasoning.encrypted_content'];
  }
  return { ...forwarded, store: false };
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
    private readonly store: ResponsesRepository,
    private readonly access: NamespaceAccess,
  ) {}

  /**
   * The request checked as far as it can be without running it: its namespace, the conversation
   * of previous_response_id (the same namespace's), the translation, the chain's room.
   */
  async prepare(caller: Caller, rawBody: unknown): Promise<PreparedResponse> {
    if (rawBody === null || typeof rawBody !== 'object' || Array.isArray(rawBody)) throw ApiError.badRequest('Request body must be a JSON object');
    const body = rawBody as Record<string, unknown>;
    const scope = await this.access.resolve(caller, body.target_namespace);
    let history: ResponseItem[] = [];
    let chainBytes = 0;
    const previous = body.previous_response_id;
    if (previous !== undefined && previous !== null) {
      if (typeof previous !== 'string') throw fieldError('previous_response_id', 'previous_response_id must be a string');
      // The same namespace only: a conversation is continued where it is billed.
      const stored = await this.store.get(previous, async (ns) => ns === scope.id, 'previous_response_id');
      history = [...stored.inputItems, ...stored.response.output];
      chainBytes = stored.chainBytes;
    }
    const translated = translateResponsesRequest(body, history);
    // Serialized once: counted against the chain's room now, stored as they are after the answer.
    const newItemsJson = translated.store ? JSON.stringify(translated.inputItems) : '';
    if (translated.store) this.store.checkChainRoom(chainBytes, newItemsJson);
    return { body, scope, history, chainBytes, translated, newItemsJson };
  }

  /**
   * Runs a Responses request. `background`: a background response's run (BackgroundResponses),
   * whose row already exists: it keeps its id and stores its answer (or failure) there.
   */
  async create(caller: Caller, rawBody: unknown, requestId: string, delivery: ResponsesDelivery, background?: BackgroundRun): Promise<void> {
    const { body, scope, history, chainBytes, translated, newItemsJson } = await this.prepare(caller, rawBody);
    if (translated.droppedTools.length > 0) delivery.header('x-atelier-dropped-tools', translated.droppedTools.join(', '));
    const shell = background?.shell ?? responseShell(`resp_${randomToken(24)}`, body, translated.store);
    const keep = async (response: ResponseObject): Promise<ResponseObject> => {
      if (background) return background.keep(response);
      if (!translated.store) return response;
      try {
        await this.store.save(scope.id, caller.userId, response, newItemsJson, chainBytes);
        return response;
      } catch (err) {
        // The answer is paid for and goes out; it says it was not stored rather than failing.
        this.logger.warn(`Storing response ${response.id} failed: ${errorSummary(err)}`);
        return { ...response, store: false };
      }
    };

    // A model whose upstream speaks /responses gets the request as it is; the rest are translated.
    let native = false;
    const nativeBody = (model: ChatModelDefinition, maxOutputTokens: number) => {
      if (model.engine.type !== 'openai-compatible' || !model.engine.responses_api) return undefined;
      native = true;
      const dropped = new Set<string>();
      const forwarded = upstreamResponsesBody(body, history, { maxOutputTokens, hostedTools: model.engine.responses_tools ?? [], dropped: (type) => dropped.add(type) });
      delivery.header('x-atelier-dropped-tools', [...dropped].join(', '));
      return forwarded;
    };
    const events = new ResponseEventStream(shell, translated.tools, (event) => delivery.event(event));
    let held: { type: string; response: ResponseObject } | undefined;
    let started = false;
    let ended = false;
    const start = () => {
      if (started) return;
      started = true;
      if (!native) events.start();
    };
    const ours = (response: Record<string, unknown>): ResponseObject => {
      const output = Array.isArray(response.output) ? (response.output as ResponseItem[]) : [];
      return {
        ...response,
        id: shell.id,
        status: typeof response.status === 'string' ? response.status : 'completed',
        model: shell.model,
        previous_response_id: shell.previous_response_id,
        store: shell.store,
        output,
        output_text: outputText(output),
      };
    };
    const finish = async () => {
      if (!native) {
        const response = await keep(events.finish());
        events.complete(response);
      } else if (held) {
        events.forward({ type: held.type, response: await keep(held.response) });
      }
      ended = true;
      delivery.end();
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
            if (!native) return events.chunk(data);
            // The upstream's own events, under this response's id and in this stream's numbering;
            // the last is held until the response is stored.
            const event = JSON.parse(data) as ResponseEvent;
            const rewritten = { ...event, ...(event.response !== undefined && { response: ours(event.response as Record<string, unknown>) }) } as ResponseEvent;
            if (event.type === 'response.completed' || event.type === 'response.incomplete') held = rewritten as { type: string; response: ResponseObject };
            else events.forward(rewritten);
          },
          deliver: async (completion) => {
            if (completion === null) {
              start();
              return finish();
            }
            if (native) return delivery.json(await keep(ours(completion)));
            const { output, finishReason } = completionOutput(completion as ChatCompletion, translated.tools);
            const response = finishResponse({ ...shell, model: completion.model ?? shell.model }, output, (completion as ChatCompletion).usage, finishReason);
            await delivery.json(await keep(response));
          },
        },
        { endpoint: RESPONSES_ENDPOINT, responses: nativeBody },
      );
    } catch (err) {
      // Before the stream opened, an ordinary HTTP error; after, response.failed ends it (never a clean end).
      if (!started) throw inResponsesTerms(err);
      if (!ended && !delivery.signal.aborted) {
        events.fail(toErrorResponse(err).body.error);
      }
      if (!ended) delivery.end();
      // A background run's failure is also its stored answer.
      if (background) throw inResponsesTerms(err);
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
