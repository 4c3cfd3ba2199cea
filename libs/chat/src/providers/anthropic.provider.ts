import { ApiError } from '@atelier/contracts';
import type { AnthropicEngineConfig } from '@atelier/models';
import { tracing } from '@atelier/observability';
import type { Dispatcher } from 'undici';
import type { ChatUsage } from '../chat-types';
import { countTextTokens } from '../token-count';
import { usageChunk, usageOf, type ChatProvider, type ChatProviderCall, type ChunkSink, type ProviderCompletion, type ProviderStream } from './chat-provider';
import { ChunksFromMessages, chatUsageOf, completionOf, messagesRequestOf } from './anthropic-translation';
import { OpenAiCompatibleProvider } from './openai-compatible.provider';
import { sseData } from './sse-reader';
import { AttemptError, UpstreamTimeout, withFallbacks, type UpstreamCall } from './upstream-attempts';
import type { Endpoint } from './upstream-endpoints';

const DEFAULT_ANTHROPIC_VERSION = '2023-06-01';

/**
 * A server that speaks Anthropic's Messages API (the `anthropic` engine): chat completions are
 * translated to Messages and back (anthropic-translation.ts), so the OpenAI SDK and the Responses
 * API work unchanged against a Claude upstream; a Messages request (the Messages API's native
 * path) goes as it is. The same retries, fallbacks, timeouts and connection pools as an
 * openai-compatible server, with Anthropic's `x-api-key` and `anthropic-version` headers.
 */
export class AnthropicProvider extends OpenAiCompatibleProvider implements ChatProvider {
  protected override headersOf(model: UpstreamCall['model'], endpoint: Endpoint, accept: string): Record<string, string> {
    const key = this.apiKeyOf(model, endpoint);
    return {
      'content-type': 'application/json',
      accept,
      'anthropic-version': (model.engine as AnthropicEngineConfig).version ?? DEFAULT_ANTHROPIC_VERSION,
      ...(key && { 'x-api-key': key }),
      ...(tracing.on && tracing.upstreamHeaders()),
    };
  }

  private request(call: UpstreamCall, endpoint: Endpoint, body: Record<string, unknown>, stream: boolean, beta?: string): Dispatcher.DispatchOptions {
    const headers = this.headersOf(call.model, endpoint, stream ? 'text/event-stream' : 'application/json');
    if (beta) headers['anthropic-beta'] = beta;
    return { origin: endpoint.target.origin, path: endpoint.target.path, method: 'POST', headers, body: JSON.stringify(body) };
  }

  override async complete(call: ChatProviderCall): Promise<ProviderCompletion> {
    return withFallbacks(call, () => false, async (endpoint, signal, armTimer) => {
      const message = await this.message(call, endpoint, messagesRequestOf(call.request, endpoint.upstreamModel, false), signal, armTimer);
      const completion = completionOf(message, call.completionId, call.model.id, call.created);
      if (!chatUsageOf(message.usage)) completion.usage = usageOf(call.promptTokens, countTextTokens(completion.choices[0].message.content ?? ''));
      return { completion, provider: endpoint.label };
    }, this.logger);
  }

  /** A non-streamed Message (anything else is retried like a 5xx). */
  private async message(call: UpstreamCall, endpoint: Endpoint, body: Record<string, unknown>, signal: AbortSignal, armTimer: () => void, beta?: string) {
    const text = await this.postBuffered(call, endpoint, this.request(call, endpoint, body, false, beta), signal, armTimer);
    let message: { content?: Record<string, unknown>[] & { type: string }[]; stop_reason?: unknown; usage?: Record<string, number> } | null;
    try {
      message = JSON.parse(text) as typeof message;
    } catch {
      message = null;
    }
    if (!message || !Array.isArray(message.content)) throw new AttemptError('retry', new ApiError('upstream_error', `The model provider sent an answer that is not a Message (${endpoint.label})`));
    return message as { content: ({ type: string } & Record<string, unknown>)[]; stop_reason?: unknown; usage?: Record<string, number> };
  }

  override async stream(call: ChatProviderCall, emit: ChunkSink): Promise<ProviderStream> {
    const answered = await this.streamEvents(call, messagesRequestOf(call.request, '', true), undefined, 'chat', emit);
    // Chat callers get the usage as OpenAI's include_usage chunk, last.
    await emit(usageChunk(call, answered.usage));
    return answered;
  }

  /**
   * The Messages API's native path: the caller's Messages request for this model, as it is but for
   * the upstream model name and a max_tokens within what was reserved. Non-streamed: the Message
   * (its usage billed as reported); streamed: Anthropic's events passed on one by one.
   */
  async messages(call: ChatProviderCall, body: Record<string, unknown>, beta: string | undefined, emit?: ChunkSink): Promise<{ message: Record<string, unknown> | null; usage: ChatUsage; provider: string }> {
    const bounded = { ...body, max_tokens: Math.min(Number(body.max_tokens) || call.request.maxTokens, call.request.maxTokens) };
    if (!emit) {
      return withFallbacks(call, () => false, async (endpoint, signal, armTimer) => {
        const message = await this.message(call, endpoint, { ...bounded, model: endpoint.upstreamModel, stream: false }, signal, armTimer, beta);
        const text = message.content.filter((b) => b.type === 'text').map((b) => String(b.text)).join('');
        return { message, usage: chatUsageOf(message.usage) ?? usageOf(call.promptTokens, countTextTokens(text)), provider: endpoint.label };
      }, this.logger);
    }
    const { usage, provider } = await this.streamEvents(call, { ...bounded, stream: true }, beta, 'native', emit);
    return { message: null, usage, provider };
  }

  /**
   * One streamed Messages call, with retries and fallbacks until the first event went out. Each
   * event is read by a ChunksFromMessages (which fails on an `error` event, and knows the usage,
   * the text and whether message_stop came) and passed on as chat chunks (`chat`) or as it is (`native`).
   */
  private async streamEvents(call: ChatProviderCall, body: Record<string, unknown>, beta: string | undefined, mode: 'chat' | 'native', emit: ChunkSink): Promise<ProviderStream> {
    let emitted = false;
    return withFallbacks(call, () => emitted, async (endpoint, signal, armTimer) => {
      const res = await this.postStream(call, endpoint, this.request(call, endpoint, { ...body, model: endpoint.upstreamModel }, true, beta), signal);
      const converter = new ChunksFromMessages(call.completionId, call.model.id, call.created);
      const failure = (message: string) => new AttemptError(emitted ? 'fatal' : 'retry', new ApiError('upstream_error', `${message} (${endpoint.label})`));
      try {
        armTimer();
        for await (const data of sseData(res.body)) {
          armTimer();
          if (converter.ended) continue;
          let chunks;
          try {
            chunks = converter.event(JSON.parse(data) as Record<string, unknown>);
          } catch (err) {
            throw failure(err instanceof SyntaxError ? 'The model provider sent a malformed stream event' : `The model provider failed: ${(err as Error).message}`);
          }
          const out = mode === 'native' ? [data] : chunks.map((c) => JSON.stringify(c));
          for (const piece of out) {
            await emit(piece);
            emitted = true;
          }
        }
      } catch (err) {
        if (err instanceof AttemptError || err instanceof UpstreamTimeout || signal.aborted) throw err;
        throw failure(`The model provider's stream failed: ${(err as Error).message}`);
      }
      if (!converter.ended) throw failure("The model provider's stream ended before message_stop");
      return { usage: converter.reportedUsage ?? usageOf(call.promptTokens, countTextTokens(converter.text)), provider: endpoint.label };
    }, this.logger);
  }
}
