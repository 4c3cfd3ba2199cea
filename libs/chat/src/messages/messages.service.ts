import { Inject, Injectable } from '@nestjs/common';
import { NamespaceAccess, type Caller } from '@atelier/auth';
import { anthropicError, ApiError, type AnthropicMessage, type AnthropicModel } from '@atelier/contracts';
import { DeployedModels, ModelCatalog, type ChatModelDefinition } from '@atelier/models';
import { randomToken } from '@atelier/random';
import { toErrorResponse } from '@atelier/runtime';
import { ChatCompletionsService } from '../chat-completions.service';
import type { ChatCompletion } from '../chat-types';
import { countPromptTokens } from '../token-count';
import { MessageEventStream, messageFromCompletion, type MessageStreamEvent } from './message-output';
import { fieldError, messagesTarget, requestedModel, translateCountTokensRequest, translateMessagesRequest } from './messages-request';

/** The route Messages usage is reported under (GET /api/usage?group_by=endpoint). */
export const MESSAGES_ENDPOINT = '/api/anthropic/v1/messages';

/** How the caller's transport receives a Message (the controller speaks HTTP/SSE). */
export interface MessagesDelivery {
  signal: AbortSignal;
  header(name: string, value: string): void;
  /** One event of a stream (the first opens it). */
  event(event: MessageStreamEvent): void;
  /** The end of a stream. */
  end(): void;
  /** A whole (non-streamed) Message. */
  json(message: AnthropicMessage): Promise<void>;
}


/**
 * Anthropic's Messages API on the chat lifecycle: the request becomes a chat completions body
 * (messages-request.ts) and runs through ChatCompletionsService (validation, token limits, the
 * credit reservation, the hand-off, retries and fallbacks, the settle, tracing and metrics), and
 * its answer or stream comes back as a Message or the Messages stream's events. Usage is reported
 * under /api/anthropic/v1/messages.
 */
@Injectable()
export class MessagesService {
  constructor(
    private readonly chat: ChatCompletionsService,
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
    private readonly deployedModels: DeployedModels,
    private readonly access: NamespaceAccess,
  ) {}

  /** The catalog chat model of that name or alias; another kind of model is the caller's mistake. */
  private catalogChatModel(name: string): ChatModelDefinition | undefined {
    const model = this.catalog.get(name);
    if (model && model.endpoint !== '/chat/completions') throw fieldError('model', `model: ${name} is not a chat model`);
    return model as ChatModelDefinition | undefined;
  }

  /**
   * `beta`: the caller's anthropic-beta header, forwarded to a native upstream. A model whose
   * engine is `anthropic` gets the request as it is (its events and Message come back as they
   * are, under the name the caller used); every other model gets it translated to chat.
   */
  async create(caller: Caller, rawBody: unknown, requestId: string, delivery: MessagesDelivery, beta?: string): Promise<void> {
    if (rawBody === null || typeof rawBody !== 'object' || Array.isArray(rawBody)) throw ApiError.badRequest('Request body must be a JSON object');
    const name = requestedModel(rawBody);
    const translated = translateMessagesRequest(rawBody, messagesTarget(this.catalogChatModel(name), name));
    const id = `msg_${randomToken(24)}`;
    let promptTokens = 0;
    let native = false;
    let nativeStarted = false;
    const stream = new MessageEventStream(id, translated.model, (event) => delivery.event(event));
    const started = () => stream.isStarted || nativeStarted;
    const nativeBody = (model: ChatModelDefinition) => {
      if (model.engine.type !== 'anthropic') return undefined;
      native = true;
      return { body: rawBody as Record<string, unknown>, beta };
    };
    if (translated.droppedTools.length > 0) delivery.header('x-atelier-dropped-tools', translated.droppedTools.join(', '));
    try {
      await this.chat.create(
        caller,
        translated.chatBody,
        requestId,
        {
          signal: delivery.signal,
          header: (header, value) => {
            // A native upstream runs Anthropic's tools itself: nothing was dropped.
            if (!(native && header === 'x-atelier-dropped-tools')) delivery.header(header, value);
          },
          chunk: (data) => {
            if (!native) {
              stream.start(promptTokens);
              return stream.chunk(data);
            }
            nativeStarted = true;
            const event = JSON.parse(data) as MessageStreamEvent & { message?: Record<string, unknown> };
            if (event.type === 'message_start' && event.message) event.message = { ...event.message, model: translated.model };
            delivery.event(event);
          },
          deliver: async (completion) => {
            if (completion !== null)
              return delivery.json(native ? ({ ...completion, model: translated.model } as AnthropicMessage) : messageFromCompletion(completion as ChatCompletion, id, translated.model));
            if (!native) {
              stream.start(promptTokens);
              stream.end(promptTokens);
            }
            delivery.end();
          },
        },
        { endpoint: MESSAGES_ENDPOINT, clampMaxTokens: true, validated: (info) => (promptTokens = info.promptTokens), messages: nativeBody, capture: { id } },
      );
    } catch (err) {
      // Before the stream opened, an ordinary HTTP error (in Anthropic's envelope); after, an error event ends it.
      if (!started()) throw err;
      if (delivery.signal.aborted) stream.dispose();
      else {
        const { status, body } = toErrorResponse(err);
        const { body: anthropic } = anthropicError(status, body, requestId);
        if (native) delivery.event({ type: 'error', error: anthropic.error });
        else stream.fail(anthropic.error.type, anthropic.error.message);
      }
      delivery.end();
    }
  }

  /** POST .../messages/count_tokens: the prompt's tokens as the model's request would count them; free. */
  async countTokens(caller: Caller, rawBody: unknown): Promise<{ input_tokens: number }> {
    const { model: name, messages, tools } = translateCountTokensRequest(rawBody);
    if (!this.catalogChatModel(name)) {
      // A deployed fine-tune the caller may call counts like its serving model.
      const deployed = await this.deployedModels.resolve(caller, name, (ns) => this.access.canAccess(caller, ns));
      if (!deployed || deployed.serving.endpoint !== '/chat/completions') throw new ApiError('resource_not_found', `Model not found: ${name}`);
    }
    // The whole prompt, past any context window: the caller asks how big it is.
    return { input_tokens: countPromptTokens(messages, tools, Number.MAX_SAFE_INTEGER) };
  }

  /** The chat models and their aliases, in Anthropic's model shape, ordered by id. */
  private models(): AnthropicModel[] {
    const view = (id: string, model: ChatModelDefinition): AnthropicModel => ({
      type: 'model',
      id,
      display_name: id === model.id ? model.display_name : `${model.display_name} (as ${id})`,
      created_at: new Date(model.created * 1000).toISOString(),
    });
    const chat = this.catalog.list({ endpoint: '/chat/completions' }) as ChatModelDefinition[];
    const aliases = this.catalog.aliasList().filter(([, m]) => m.endpoint === '/chat/completions') as [string, ChatModelDefinition][];
    return [...chat.map((m) => view(m.id, m)), ...aliases.map(([alias, m]) => view(alias, m))].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /** GET .../models: Anthropic's page (`limit` 1-1000, default 20; `after_id` or `before_id`). */
  listModels(query: Record<string, unknown>): { data: AnthropicModel[]; has_more: boolean; first_id: string | null; last_id: string | null } {
    const limit = query.limit === undefined ? 20 : Number(query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw fieldError('limit', 'limit: must be an integer between 1 and 1000');
    for (const field of ['after_id', 'before_id'])
      if (query[field] !== undefined && typeof query[field] !== 'string') throw fieldError(field, `${field}: must be a model id, given once`);
    const all = this.models();
    let from = 0;
    let to = all.length;
    if (typeof query.after_id === 'string') from = all.findIndex((m) => m.id === query.after_id) + 1;
    if (typeof query.before_id === 'string') to = Math.max(all.findIndex((m) => m.id === query.before_id), 0);
    const page = typeof query.before_id === 'string' && query.after_id === undefined ? all.slice(Math.max(to - limit, 0), to) : all.slice(from, Math.min(from + limit, to));
    const hasMore = typeof query.before_id === 'string' && query.after_id === undefined ? to - limit > 0 : from + limit < to;
    return { data: page, has_more: hasMore, first_id: page[0]?.id ?? null, last_id: page.at(-1)?.id ?? null };
  }

  getModel(id: string): AnthropicModel {
    const found = this.models().find((m) => m.id === id);
    if (!found) throw new ApiError('resource_not_found', `Model not found: ${id}`);
    return found;
  }
}
