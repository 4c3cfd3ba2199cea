import { Logger } from '@nestjs/common';
import { Agent, type Dispatcher } from 'undici';
import { ApiError } from '@atelier/contracts';
import { tracing } from '@atelier/observability';
import type { ChatModelDefinition } from '@atelier/models';
import type { ChatCompletion, ChatCompletionChunk, ChatToolCall, ChatUsage } from '../chat-types';
import { countTextTokens, toolCallTokens } from '../token-count';
import { usageChunk, usageOf, type ChatProvider, type ChatProviderCall, type ChunkSink, type ProviderCompletion, type ProviderStream } from './chat-provider';
import { sseData } from './sse-reader';
import { AdapterNotLoaded, AttemptError, refusal, UpstreamTimeout, withFallbacks, type UpstreamCall } from './upstream-attempts';
import { routeTarget, type Endpoint } from './upstream-endpoints';
import { CutOff, dispatchBuffered, header, messageOf, upstreamMessage, type BufferedAnswer, type UpstreamResponse } from './upstream-exchange';

export { DEFAULT_MAX_RETRIES, DEFAULT_RETRY_BACKOFF_MS } from '@atelier/runtime';
export { DEFAULT_UPSTREAM_KEEP_ALIVE_MS, DEFAULT_UPSTREAM_TIMEOUT_MS } from './upstream-endpoints';

/** Loads a deployed LoRA adapter into its server again (LoraAdapters.reload). */
export type AdapterReload = (serving: ChatModelDefinition, name: string) => Promise<void>;

export type SecretLookup = (envName: string) => string | undefined;

/**
 * Any server that speaks the OpenAI chat API (vLLM, llama.cpp server, Ollama, OpenAI, Together,
 * ...). Tries the model's endpoint and then its fallbacks, each with retries and exponential
 * backoff, but only until the first byte of an answer has been passed on; after that a failure
 * ends the stream. Streams are forwarded event by event as they arrive.
 */
export class OpenAiCompatibleProvider implements ChatProvider {
  protected readonly logger = new Logger(this.constructor.name);
  /**
   * undici rather than node:http (or fetch): the upstream call is most of a chat pod's own CPU
   * per request, which bounds its throughput, and undici spends about 40 % less on it (19
   * against 33 us of client CPU per call in a closed loop against a local server with its
   * request API; 14 us with dispatch, which non-streamed answers use: dispatchBuffered). Its own
   * timeouts are off: each attempt is bounded by the endpoint's timeout_ms, armed again on every
   * stream event (withFallbacks).
   */
  private readonly agents = new Map<number, Agent>();

  constructor(
    protected readonly secrets: SecretLookup,
    private readonly reloadAdapter?: AdapterReload,
  ) {}

  /** A call for a LoRA adapter its server lost is made again once, after the adapter is loaded again. */
  private async withAdapter<T>(call: ChatProviderCall, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (err) {
      if (!(err instanceof AdapterNotLoaded) || call.adapter?.kind !== 'lora' || !this.reloadAdapter) throw err;
      await this.reloadAdapter(call.model, call.adapter.name);
      return run();
    }
  }

  async complete(call: ChatProviderCall): Promise<ProviderCompletion> {
    return this.withAdapter(call, () => this.completeOnce(call));
  }

  private async completeOnce(call: ChatProviderCall): Promise<ProviderCompletion> {
    return withFallbacks(call, () => false, async (endpoint, signal, armTimer) => {
      const text = await this.postBuffered(call, endpoint, this.requestOf(call, endpoint, false), signal, armTimer);
      let completion: ChatCompletion;
      try {
        completion = JSON.parse(text) as ChatCompletion;
      } catch {
        throw new AttemptError('retry', new ApiError('upstream_error', `The model provider sent a response that is not JSON (${endpoint.label})`));
      }
      if (!completion || !Array.isArray(completion.choices))
        throw new AttemptError('retry', new ApiError('upstream_error', `The model provider sent a response without choices (${endpoint.label})`));
      completion.id = call.completionId;
      completion.model = call.model.id;
      completion.object = 'chat.completion';
      completion.created ??= call.created;
      for (const choice of completion.choices) choice.message?.tool_calls?.forEach((tc, i) => (tc.index ??= i));
      if (!validUsage(completion.usage)) {
        const message = completion.choices[0]?.message;
        const completionTokens = countTextTokens(typeof message?.content === 'string' ? message.content : '') + toolCallTokens(message?.tool_calls ?? []);
        completion.usage = usageOf(call.promptTokens, completionTokens);
      }
      return { completion, provider: endpoint.label };
    }, this.logger);
  }

  async stream(call: ChatProviderCall, emit: ChunkSink): Promise<ProviderStream> {
    return this.withAdapter(call, () => this.streamOnce(call, emit));
  }

  private async streamOnce(call: ChatProviderCall, emit: ChunkSink): Promise<ProviderStream> {
    let emitted = false;
    return withFallbacks(call, () => emitted, async (endpoint, signal, armTimer) => {
      const res = await this.postStream(call, endpoint, this.requestOf(call, endpoint, true), signal);
      let content = '';
      const toolCalls: ChatToolCall[] = [];
      let usage: ChatUsage | undefined;
      let lastCarriedUsage = false;
      let done = false;
      const failure = (message: string) =>
        new AttemptError(emitted ? 'fatal' : 'retry', new ApiError('upstream_error', `${message} (${endpoint.label})`));
      try {
        armTimer();
        for await (const data of sseData(res.body)) {
          armTimer();
          // Reading on to the end of the body (rather than breaking) lets the connection be reused.
          if (done) continue;
          if (data === '[DONE]') {
            done = true;
            continue;
          }
          let chunk: ChatCompletionChunk & { error?: { message?: string } };
          try {
            chunk = JSON.parse(data) as typeof chunk;
          } catch {
            throw failure('The model provider sent a malformed stream event');
          }
          if (chunk.error) throw failure(`The model provider failed: ${chunk.error.message ?? 'unknown error'}`);
          chunk.id = call.completionId;
          chunk.model = call.model.id;
          for (const choice of chunk.choices ?? []) {
            if (typeof choice.delta?.content === 'string') content += choice.delta.content;
            for (const tc of choice.delta?.tool_calls ?? []) {
              const slot = (toolCalls[tc.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
              slot.function.name += tc.function?.name ?? '';
              slot.function.arguments += tc.function?.arguments ?? '';
            }
          }
          lastCarriedUsage = validUsage(chunk.usage);
          if (lastCarriedUsage) usage = chunk.usage as ChatUsage;
          await emit(JSON.stringify(chunk));
          emitted = true;
        }
      } catch (err) {
        if (err instanceof AttemptError || err instanceof UpstreamTimeout || signal.aborted) throw err;
        throw failure(`The model provider's stream failed: ${(err as Error).message}`);
      }
      if (!done) throw failure("The model provider's stream ended before it was complete");
      const final = usage ?? usageOf(call.promptTokens, countTextTokens(content) + toolCallTokens(toolCalls.filter(Boolean)));
      if (!lastCarriedUsage) await emit(usageChunk(call, final));
      return { usage: final, provider: endpoint.label };
    }, this.logger);
  }

  /**
   * A non-streamed POST of another OpenAI route (`/embeddings`) to the model's servers, with
   * chat's retries, fallbacks, timeouts and connection pools: the first 2xx answer's body, and
   * which server gave it. `parse` rejects an answer that is not usable (retried like a 5xx).
   */
  async post<T>(
    call: UpstreamCall,
    route: string,
    body: (upstreamModel: string) => Record<string, unknown>,
    parse: (text: string) => T | undefined,
  ): Promise<{ value: T; provider: string }> {
    return withFallbacks(call, () => false, async (endpoint, signal, armTimer) => {
      const target = routeTarget(endpoint, route);
      const request: Dispatcher.DispatchOptions = {
        origin: target.origin,
        path: target.path,
        method: 'POST',
        headers: this.headersOf(call.model, endpoint, 'application/json'),
        body: JSON.stringify(body(endpoint.upstreamModel)),
      };
      const text = await this.postBuffered(call, endpoint, request, signal, armTimer);
      let value: T | undefined;
      try {
        value = parse(text);
      } catch {
        value = undefined;
      }
      if (value === undefined) throw new AttemptError('retry', new ApiError('upstream_error', `The model provider sent an answer atelier cannot read (${endpoint.label})`));
      return { value, provider: endpoint.label };
    }, this.logger);
  }

  /**
   * A Responses API request to a server that speaks it (the engine's responses_api), as the caller
   * sent it but for the upstream model name: the Response (non-streamed), or its events passed on
   * one by one (streamed), the usage read from the final response. An `error` or `response.failed`
   * event fails the call (the gateway ends the stream with its own response.failed).
   */
  async responses(call: ChatProviderCall, body: Record<string, unknown>, emit?: ChunkSink): Promise<{ response: Record<string, unknown> | null; usage: ChatUsage; provider: string }> {
    if (!emit) {
      const { value, provider } = await this.post(call, '/responses', (model) => ({ ...body, model, stream: false }), (text) => {
        const response = JSON.parse(text) as Record<string, unknown> | null;
        return response && Array.isArray(response.output) ? response : undefined;
      });
      return { response: value, usage: responsesUsage(value, call), provider };
    }
    let emitted = false;
    return withFallbacks(call, () => emitted, async (endpoint, signal, armTimer) => {
      const target = routeTarget(endpoint, '/responses');
      const request: Dispatcher.DispatchOptions = {
        origin: target.origin,
        path: target.path,
        method: 'POST',
        headers: this.headersOf(call.model, endpoint, 'text/event-stream'),
        body: JSON.stringify({ ...body, model: endpoint.upstreamModel, stream: true }),
      };
      const res = await this.postStream(call, endpoint, request, signal);
      const failure = (message: string) => new AttemptError(emitted ? 'fatal' : 'retry', new ApiError('upstream_error', `${message} (${endpoint.label})`));
      let final: Record<string, unknown> | undefined;
      try {
        armTimer();
        for await (const data of sseData(res.body)) {
          armTimer();
          // Read on to the end of the body, so the connection can be reused.
          if (final || data === '[DONE]') continue;
          let event: { type?: string; message?: string; response?: Record<string, unknown> & { error?: { message?: string } } };
          try {
            event = JSON.parse(data) as typeof event;
          } catch {
            throw failure('The model provider sent a malformed stream event');
          }
          if (event.type === 'error' || event.type === 'response.failed')
            throw failure(`The model provider failed: ${event.message ?? event.response?.error?.message ?? 'unknown error'}`);
          if ((event.type === 'response.completed' || event.type === 'response.incomplete') && event.response) final = event.response;
          await emit(data);
          emitted = true;
        }
      } catch (err) {
        if (err instanceof AttemptError || err instanceof UpstreamTimeout || signal.aborted) throw err;
        throw failure(`The model provider's stream failed: ${(err as Error).message}`);
      }
      if (!final) throw failure("The model provider's stream ended before it was complete");
      return { response: null, usage: responsesUsage(final, call), provider: endpoint.label };
    }, this.logger);
  }

  /** One connection pool per keep-alive setting: undici sets it per agent, not per request. */
  private agentFor(endpoint: Endpoint): Agent {
    let agent = this.agents.get(endpoint.keepAliveMs);
    if (!agent) {
      agent = new Agent({ connections: 512, headersTimeout: 0, bodyTimeout: 0, keepAliveTimeout: endpoint.keepAliveMs });
      this.agents.set(endpoint.keepAliveMs, agent);
    }
    return agent;
  }

  /** The headers of one attempt's request: OpenAI's bearer key (an anthropic engine's provider sends its own). */
  protected headersOf(model: UpstreamCall['model'], endpoint: Endpoint, accept: string): Record<string, string> {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept, ...(tracing.on && tracing.upstreamHeaders()) };
    const key = this.apiKeyOf(model, endpoint);
    if (key) headers.authorization = `Bearer ${key}`;
    else if (endpoint.target.basicAuth) headers.authorization = endpoint.target.basicAuth;
    return headers;
  }

  /** The endpoint's API key from its environment variable; none named: undefined; named but unset: the next endpoint is tried. */
  protected apiKeyOf(model: UpstreamCall['model'], endpoint: Endpoint): string | undefined {
    if (!endpoint.apiKeyEnv) return undefined;
    const key = this.secrets(endpoint.apiKeyEnv);
    if (!key) throw new AttemptError('next', new ApiError('service_unavailable', `The model provider of ${model.id} is not configured (its API key is not set)`));
    return key;
  }

  private requestOf(call: ChatProviderCall, endpoint: Endpoint, stream: boolean): Dispatcher.DispatchOptions {
    const headers = this.headersOf(call.model, endpoint, stream ? 'text/event-stream' : 'application/json');
    // A deployed LoRA adapter is asked for by its name, which the server loaded it under.
    const body: Record<string, unknown> = { ...call.body, model: call.adapter?.kind === 'lora' ? call.adapter.name : endpoint.upstreamModel, stream };
    // The completion limit atelier reserved credits for, in the field the caller used.
    if (call.body.max_completion_tokens !== undefined) {
      body.max_completion_tokens = call.request.maxTokens;
      delete body.max_tokens;
    } else body.max_tokens = call.request.maxTokens;
    if (stream) body.stream_options = { ...((call.body.stream_options as object | undefined) ?? {}), include_usage: true };
    else delete body.stream_options;
    const { target } = endpoint;
    return { origin: target.origin, path: target.path, method: 'POST', headers, body: JSON.stringify(body) };
  }

  private unreachable(endpoint: Endpoint, err: Error): AttemptError {
    return new AttemptError('retry', new ApiError('upstream_error', `The model provider could not be reached (${endpoint.label}): ${err.message}`));
  }

  /** A non-streamed answer's body, once it is whole; `onHeaders` runs when its headers arrive. */
  protected async postBuffered(call: UpstreamCall, endpoint: Endpoint, request: Dispatcher.DispatchOptions, signal: AbortSignal, onHeaders: () => void): Promise<string> {
    let answer: BufferedAnswer;
    try {
      answer = await dispatchBuffered(this.agentFor(endpoint), request, signal, onHeaders);
    } catch (err) {
      if (err instanceof UpstreamTimeout || signal.aborted) throw err;
      if (err instanceof CutOff)
        throw new AttemptError('retry', new ApiError('upstream_error', `The model provider's response was cut off (${endpoint.label}): ${err.message}`));
      throw this.unreachable(endpoint, err as Error);
    }
    const { statusCode, headers, text } = answer;
    if (statusCode >= 200 && statusCode < 300) return text;
    throw refusal(endpoint, statusCode, messageOf(text, statusCode), headers, call, this.logger);
  }

  /** A streamed answer whose status is 2xx and whose body is an event stream. */
  protected async postStream(call: UpstreamCall, endpoint: Endpoint, request: Dispatcher.DispatchOptions, signal: AbortSignal): Promise<UpstreamResponse> {
    let res: UpstreamResponse;
    try {
      res = await this.agentFor(endpoint).request({ ...request, signal });
    } catch (err) {
      if (err instanceof UpstreamTimeout || signal.aborted) throw err;
      throw this.unreachable(endpoint, err as Error);
    }
    const status = res.statusCode ?? 0;
    if (status >= 200 && status < 300) {
      if (!String(header(res.headers, 'content-type') ?? '').includes('text/event-stream')) {
        res.body.destroy();
        throw new AttemptError('next', new ApiError('upstream_error', `The model provider did not stream its answer (${endpoint.label})`));
      }
      return res;
    }
    throw refusal(endpoint, status, await upstreamMessage(res), res.headers, call, this.logger);
  }

}

/** A Response's usage as chat usage; counted by atelier (prompt as validated, output text) when the upstream reports none. */
function responsesUsage(response: Record<string, unknown>, call: ChatProviderCall): ChatUsage {
  const usage = response.usage as { input_tokens?: unknown; output_tokens?: unknown } | null | undefined;
  if (usage && typeof usage.input_tokens === 'number' && typeof usage.output_tokens === 'number') return usageOf(usage.input_tokens, usage.output_tokens);
  const text = ((response.output as { type?: string; content?: { text?: string }[] }[] | undefined) ?? [])
    .flatMap((item) => (item.type === 'message' ? (item.content ?? []) : []))
    .map((part) => part.text ?? '')
    .join('');
  return usageOf(call.promptTokens, countTextTokens(text));
}

function validUsage(usage: unknown): boolean {
  const u = usage as ChatUsage | null | undefined;
  return !!u && typeof u.prompt_tokens === 'number' && typeof u.completion_tokens === 'number';
}
