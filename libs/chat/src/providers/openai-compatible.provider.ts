import { STATUS_CODES } from 'node:http';
import { Logger } from '@nestjs/common';
import { Agent, type Dispatcher } from 'undici';
import { ApiError } from '@atelier/contracts';
import { tracing } from '@atelier/observability';
import { abortFollowing, retryAfterMs, retryDelayMs, statusFailureKind, type UpstreamFailureKind } from '@atelier/runtime';
import type { ChatModelDefinition, EngineConfig, OpenAiCompatibleEngineConfig } from '@atelier/models';
import type { ChatCompletion, ChatCompletionChunk, ChatToolCall, ChatUsage } from '../chat-types';
import { countTextTokens, toolCallTokens } from '../token-count';
import { usageChunk, usageOf, type ChatProvider, type ChatProviderCall, type ChunkSink, type ProviderCompletion, type ProviderStream } from './chat-provider';
import { sseData } from './sse-reader';

export const DEFAULT_UPSTREAM_TIMEOUT_MS = 60_000;
export { DEFAULT_MAX_RETRIES, DEFAULT_RETRY_BACKOFF_MS } from '@atelier/runtime';
/** undici's own default, named: the engine's keep_alive_ms explains the choice. */
export const DEFAULT_UPSTREAM_KEEP_ALIVE_MS = 4_000;

interface Endpoint {
  baseUrl: string;
  /** Where `${baseUrl}/chat/completions` is, worked out once. */
  target: { origin: string; path: string; basicAuth?: string };
  upstreamModel: string;
  apiKeyEnv?: string;
  timeoutMs: number;
  /** How long an idle connection waits for the next call when the server gives no Keep-Alive hint. */
  keepAliveMs: number;
  label: string;
}

/**
 * How a failed attempt continues (the shared policy's UpstreamFailureKind): `retry` the same server
 * after a backoff (429, 5xx, timeouts, connection errors, a stream cut before its first chunk), move
 * to the `next` server (this one is misconfigured: missing key, 401/403/404), or stop (`fatal`: the
 * request itself is wrong, or part of the answer was already streamed and cannot be taken back).
 */
class AttemptError extends Error {
  constructor(
    readonly kind: UpstreamFailureKind,
    readonly apiError: ApiError,
    readonly retryAfterMs?: number,
  ) {
    super(apiError.message);
  }
}

class UpstreamTimeout extends Error {}

/** What the retry loop needs of a call: which model (its engine's servers), its signal, a LoRA adapter. */
interface UpstreamCall {
  model: { id: string; engine: EngineConfig };
  signal: AbortSignal;
  adapter?: ChatProviderCall['adapter'];
}

/** A route of an endpoint's server (`/embeddings`), worked out once per endpoint. */
const routeTargets = new WeakMap<Endpoint, Map<string, Endpoint['target']>>();

function routeTarget(endpoint: Endpoint, route: string): Endpoint['target'] {
  let targets = routeTargets.get(endpoint);
  if (!targets) routeTargets.set(endpoint, (targets = new Map()));
  let target = targets.get(route);
  if (!target) targets.set(route, (target = requestTarget(new URL(`${endpoint.baseUrl}${route}`))));
  return target;
}

/** The server does not know the LoRA adapter asked for (it restarted and lost it). */
class AdapterNotLoaded extends ApiError {}

/** Loads a deployed LoRA adapter into its server again (LoraAdapters.reload). */
export type AdapterReload = (serving: ChatModelDefinition, name: string) => Promise<void>;

export type SecretLookup = (envName: string) => string | undefined;

/** The origin and path of a URL (the catalog only admits http(s) base URLs), and the Basic credentials it carries. */
function requestTarget(url: URL): Endpoint['target'] {
  const credentials = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
  return {
    origin: url.origin,
    path: `${url.pathname}${url.search}`,
    ...(url.username || url.password ? { basicAuth: `Basic ${Buffer.from(credentials).toString('base64')}` } : {}),
  };
}

/** An upstream's answer as undici gives it: the body must be read to its end or destroyed. */
type UpstreamResponse = Dispatcher.ResponseData;

/** Per engine definition (catalog entries are immutable once loaded), so a call parses no URLs. */
const endpointCache = new WeakMap<OpenAiCompatibleEngineConfig, Endpoint[]>();

function endpointsOf(engine: OpenAiCompatibleEngineConfig): Endpoint[] {
  const cached = endpointCache.get(engine);
  if (cached) return cached;
  const all = [engine, ...(engine.fallbacks ?? [])];
  const endpoints = all.map((e) => {
    const baseUrl = e.base_url.replace(/\/+$/, '');
    return {
      baseUrl,
      target: requestTarget(new URL(`${baseUrl}/chat/completions`)),
      upstreamModel: e.upstream_model,
      apiKeyEnv: e.api_key_env,
      timeoutMs: e.timeout_ms ?? engine.timeout_ms ?? DEFAULT_UPSTREAM_TIMEOUT_MS,
      keepAliveMs: e.keep_alive_ms ?? engine.keep_alive_ms ?? DEFAULT_UPSTREAM_KEEP_ALIVE_MS,
      label: `openai-compatible:${e.upstream_model}@${new URL(baseUrl).host}`,
    };
  });
  endpointCache.set(engine, endpoints);
  return endpoints;
}

function cancelled(): ApiError {
  return new ApiError('timeout', 'The request was cancelled');
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(cancelled());
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(cancelled());
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

function header(headers: UpstreamResponse['headers'], name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function retryAfter(headers: UpstreamResponse['headers']): number | undefined {
  return retryAfterMs(header(headers, 'retry-after'));
}

/** A whole non-streamed answer: what dispatchBuffered resolves with. */
interface BufferedAnswer {
  statusCode: number;
  headers: UpstreamResponse['headers'];
  text: string;
}

/** The answer's body failed after its headers had arrived. */
class CutOff extends Error {}

/**
 * One call through undici's dispatch API, its body collected by the handler. undici's request()
 * wraps every response in a Readable stream, an AsyncResource and several promises: besides
 * their CPU (18-19 against 14 us per call in a closed loop against a local server), about a
 * quarter of what request() allocates outlives young-generation collections and is promoted
 * (none here), which made the chat service's scavenges and mark-compacts longer. `onHeaders`
 * runs when the response headers arrive.
 */
function dispatchBuffered(agent: Agent, opts: Dispatcher.DispatchOptions, signal: AbortSignal, onHeaders: () => void): Promise<BufferedAnswer> {
  return new Promise((resolve, reject) => {
    let controller: Dispatcher.DispatchController | undefined;
    let answer: Omit<BufferedAnswer, 'text'> | undefined;
    const chunks: Buffer[] = [];
    const onAbort = () => controller?.abort(signal.reason);
    const settle = (err?: Error) => {
      signal.removeEventListener('abort', onAbort);
      if (err) reject(answer ? new CutOff(err.message) : err);
      else resolve({ ...answer!, text: chunks.length === 1 ? chunks[0].toString('utf8') : Buffer.concat(chunks).toString('utf8') });
    };
    signal.addEventListener('abort', onAbort, { once: true });
    agent.dispatch(opts, {
      onRequestStart(c) {
        controller = c;
        if (signal.aborted) c.abort(signal.reason);
      },
      onResponseStart(_c, statusCode, headers) {
        if (statusCode < 200) return;
        answer = { statusCode, headers };
        onHeaders();
      },
      onResponseData(_c, chunk) {
        chunks.push(chunk);
      },
      onResponseEnd() {
        settle();
      },
      onResponseError(_c, err) {
        settle(err);
      },
    });
  });
}

function messageOf(text: string, statusCode: number): string {
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    const msg = typeof parsed.error === 'string' ? parsed.error : (parsed.error?.message ?? parsed.message);
    if (typeof msg === 'string' && msg) return msg.slice(0, 500);
  } catch {
    // not JSON: fall through to the raw text
  }
  // undici does not pass on the status line's text; the standard phrase stands in for it.
  return text.slice(0, 200) || STATUS_CODES[statusCode] || `HTTP ${statusCode}`;
}

async function upstreamMessage(res: UpstreamResponse): Promise<string> {
  return messageOf(await res.body.text().catch(() => ''), res.statusCode);
}

/**
 * Any server that speaks the OpenAI chat API (vLLM, llama.cpp server, Ollama, OpenAI, Together,
 * ...). Tries the model's endpoint and then its fallbacks, each with retries and exponential
 * backoff, but only until the first byte of an answer has been passed on; after that a failure
 * ends the stream. Streams are forwarded event by event as they arrive.
 */
export class OpenAiCompatibleProvider implements ChatProvider {
  private readonly logger = new Logger('OpenAiCompatibleProvider');
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
    private readonly secrets: SecretLookup,
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
    return this.withFallbacks(call, () => false, async (endpoint, signal, armTimer) => {
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
    });
  }

  async stream(call: ChatProviderCall, emit: ChunkSink): Promise<ProviderStream> {
    return this.withAdapter(call, () => this.streamOnce(call, emit));
  }

  private async streamOnce(call: ChatProviderCall, emit: ChunkSink): Promise<ProviderStream> {
    let emitted = false;
    return this.withFallbacks(call, () => emitted, async (endpoint, signal, armTimer) => {
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
    });
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
    return this.withFallbacks(call, () => false, async (endpoint, signal, armTimer) => {
      const target = routeTarget(endpoint, route);
      const request: Dispatcher.DispatchOptions = {
        origin: target.origin,
        path: target.path,
        method: 'POST',
        headers: this.headersOf(call.model.id, endpoint, 'application/json'),
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
    });
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
    return this.withFallbacks(call, () => emitted, async (endpoint, signal, armTimer) => {
      const target = routeTarget(endpoint, '/responses');
      const request: Dispatcher.DispatchOptions = {
        origin: target.origin,
        path: target.path,
        method: 'POST',
        headers: this.headersOf(call.model.id, endpoint, 'text/event-stream'),
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
    });
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

  /** The upstream request of one attempt. */
  private headersOf(modelId: string, endpoint: Endpoint, accept: string): Record<string, string> {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept, ...(tracing.on && tracing.upstreamHeaders()) };
    if (endpoint.apiKeyEnv) {
      const key = this.secrets(endpoint.apiKeyEnv);
      if (!key) throw new AttemptError('next', new ApiError('service_unavailable', `The model provider of ${modelId} is not configured (its API key is not set)`));
      headers.authorization = `Bearer ${key}`;
    } else if (endpoint.target.basicAuth) headers.authorization = endpoint.target.basicAuth;
    return headers;
  }

  private requestOf(call: ChatProviderCall, endpoint: Endpoint, stream: boolean): Dispatcher.DispatchOptions {
    const headers = this.headersOf(call.model.id, endpoint, stream ? 'text/event-stream' : 'application/json');
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
  private async postBuffered(call: UpstreamCall, endpoint: Endpoint, request: Dispatcher.DispatchOptions, signal: AbortSignal, onHeaders: () => void): Promise<string> {
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
    throw this.refusal(endpoint, statusCode, messageOf(text, statusCode), headers, call);
  }

  /** A streamed answer whose status is 2xx and whose body is an event stream. */
  private async postStream(call: UpstreamCall, endpoint: Endpoint, request: Dispatcher.DispatchOptions, signal: AbortSignal): Promise<UpstreamResponse> {
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
    throw this.refusal(endpoint, status, await upstreamMessage(res), res.headers, call);
  }

  /** What a non-2xx answer means for the attempt. */
  private refusal(endpoint: Endpoint, status: number, message: string, headers: UpstreamResponse['headers'], call: UpstreamCall): AttemptError {
    if (status === 404 && call.adapter?.kind === 'lora')
      return new AttemptError('fatal', new AdapterNotLoaded('upstream_error', `The LoRA server does not have ${call.adapter.name} loaded (${endpoint.label}): ${message}`));
    const kind = statusFailureKind(status);
    if (status === 429)
      return new AttemptError(kind, new ApiError('rate_limited', `The model provider is rate limiting requests: ${message}`), retryAfter(headers));
    if (kind === 'retry')
      return new AttemptError(kind, new ApiError('upstream_error', `The model provider failed with HTTP ${status}: ${message}`), retryAfter(headers));
    if (kind === 'next') {
      this.logger.warn(`${endpoint.label} answered ${status}: ${message}`);
      return new AttemptError('next', new ApiError('upstream_error', `The model provider refused the request (HTTP ${status}); check its configuration`));
    }
    return new AttemptError('fatal', ApiError.badRequest(`The model provider rejected the request: ${message}`));
  }

  /**
   * Runs `attempt` against each endpoint in turn. `armTimer` (re)starts the attempt's
   * inactivity timeout: time to the response headers, then between stream events.
   */
  private async withFallbacks<T>(
    call: UpstreamCall,
    committed: () => boolean,
    attempt: (endpoint: Endpoint, signal: AbortSignal, armTimer: () => void) => Promise<T>,
  ): Promise<T> {
    const engine = call.model.engine as OpenAiCompatibleEngineConfig;
    const policy = { maxRetries: engine.max_retries, backoffMs: engine.retry_backoff_ms };
    let last: AttemptError | undefined;
    for (const endpoint of endpointsOf(engine)) {
      for (let n = 0; ; n++) {
        if (call.signal.aborted) throw cancelled();
        const { controller, unlink } = abortFollowing(call.signal);
        const signal = controller.signal;
        const timer = setTimeout(() => controller.abort(new UpstreamTimeout()), endpoint.timeoutMs);
        const armTimer = () => void timer.refresh();
        try {
          return await attempt(endpoint, signal, armTimer);
        } catch (err) {
          // Frees the connection of a response that was not read to the end.
          controller.abort();
          if (call.signal.aborted) throw cancelled();
          const timedOut = controller.signal.aborted && controller.signal.reason instanceof UpstreamTimeout;
          last = timedOut
            ? new AttemptError(
                committed() ? 'fatal' : 'retry',
                new ApiError('timeout', `The model provider did not answer within ${endpoint.timeoutMs} ms (${endpoint.label})`),
              )
            : err instanceof AttemptError
              ? err
              : new AttemptError('fatal', new ApiError('upstream_error', `The model provider failed (${endpoint.label}): ${(err as Error).message}`));
          if (last.kind === 'fatal' || committed()) throw last.apiError;
          this.logger.warn(`${endpoint.label} attempt ${n + 1} failed: ${last.message}`);
          if (last.kind === 'next') break;
          const delay = retryDelayMs(policy, n, last.retryAfterMs);
          if (delay === undefined) break;
          await sleep(delay, call.signal);
        } finally {
          clearTimeout(timer);
          unlink();
        }
      }
    }
    throw (last ?? new AttemptError('fatal', new ApiError('upstream_error', 'No model provider is configured'))).apiError;
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
