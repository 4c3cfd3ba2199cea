import { Inject, Injectable } from '@nestjs/common';
import { NamespaceAccess, type Caller, type NamespaceScope } from '@atelier/auth';
import { chargeTags, PaidRequests, reservationReference, type ChargeTags, type Reservation } from '@atelier/billing';
import { ApiError, CHAT_COMPLETION_QUEUE, type ChatCompletionOutcome, type ChatModelAdapter } from '@atelier/contracts';
import { DeployedModels, deployedDefinition, ModelCatalog, type ChatModelDefinition } from '@atelier/models';
import { Metrics, tracing } from '@atelier/observability';
import { randomToken, uuidV7 } from '@atelier/random';
import { RateLimiter, RpcClient, type RateLimit } from '@atelier/runtime';
import { tokenCost } from './chat-pricing';
import { parseChatRequest, resolveChatModel } from './chat-request';
import type { ChatRequest, ChatUsage } from './chat-types';
import { countTextTokens, toolCallTokens } from './token-count';
import { correctTokens, takeTokens } from './tokens-per-minute';
import { assembleStreamedCompletion, completionFromMessages, storedMessages, storedRequest, storeDecision, type StoreDecision } from './stored-completions/completion-capture';
import { StoredCompletions } from './stored-completions/stored-completions.service';
import { Experiments, type RoutedVariant } from './experiments/experiments.service';

/** The route chat usage is reported under (GET /api/usage?group_by=endpoint). */
const CHAT_ENDPOINT = '/api/ai/chat/completions';

/** How the caller's transport receives the answer (the gateway's controller speaks HTTP/SSE). */
export interface ChatDelivery {
  /** Aborts the request wherever it runs (the client went away). */
  signal: AbortSignal;
  /** One streamed chat.completion.chunk (serialized JSON). */
  chunk(data: string): void;
  /** The whole answer (null: the end of a stream). The charge is settled once this resolves. */
  deliver(completion: Record<string, unknown> | null): Promise<void>;
  /** A response header (rate-limit figures); set before the first chunk or the answer, or before a refusal is thrown. */
  header(name: string, value: string): void;
}

export interface ChatOptions {
  /** The route usage is reported under (default /api/ai/chat/completions). */
  endpoint?: string;
  /**
   * The Responses request to forward as it is when the model's upstream speaks /responses
   * natively (the engine's responses_api); undefined otherwise, and the chat body is sent.
   */
  responses?: (model: ChatModelDefinition, maxOutputTokens: number) => Record<string, unknown> | undefined;
  /** max_tokens is a ceiling: past what the context window leaves, it is lowered rather than refused (the Messages API). */
  clampMaxTokens?: boolean;
  /**
   * The Messages request to forward as it is when the model's upstream speaks Anthropic's Messages
   * API (an `anthropic` engine), with its anthropic-beta header; undefined otherwise.
   */
  messages?: (model: ChatModelDefinition) => { body: Record<string, unknown>; beta?: string } | undefined;
  /** Told the prompt's token count once the request is validated, before any work starts (Messages' message_start). */
  validated?: (info: { promptTokens: number; maxTokens: number; model: ChatModelDefinition }) => void;
  /**
   * Kept as a stored completion when the namespace's capture_rate samples it (or an experiment
   * with a metric answered it), under the id the caller sees (a Messages msg_ id): for routes
   * without OpenAI's store field. A native upstream's answer keeps its own id.
   */
  capture?: { id: string };
}

/** A validated request, counted against its token limits, not yet paid for. */
interface ValidatedChat {
  completionId: string;
  caller: Caller;
  scope: NamespaceScope;
  model: ChatModelDefinition;
  /** A deployed fine-tune: the catalog model serving it, and its adapter. */
  deployed?: { serving: string; adapter: ChatModelAdapter };
  request: ChatRequest;
  body: Record<string, unknown>;
  /** A Responses request for an upstream that speaks it natively (ChatOptions.responses). */
  responses?: Record<string, unknown>;
  /** A Messages request for an anthropic upstream (ChatOptions.messages). */
  messages?: { body: Record<string, unknown>; beta?: string };
  promptTokens: number;
  /** The reservation's amount: prompt plus completion limit at the model's prices. */
  estimate: string;
  tags: ChargeTags;
  requestId: string;
  startedAt: number;
  /**
   * The tokens-per-minute limits this request is being counted against, and for how many tokens:
   * under way while the max_concurrent slots are taken (one Redis round trip for both), and
   * awaited with them before any work starts.
   */
  tokensTaken: Promise<RateLimit[]>;
  /** Kept as a stored completion once answered (store: true, the namespace's capture_rate, an experiment with a metric). */
  keep?: StoreDecision;
  /** The experiment the model named, and the variant it routed this request to. */
  experiment?: RoutedVariant['experiment'];
  /** The id the caller sees, when it is not a chat completion's (ChatOptions.capture). */
  captureId?: string;
}

/** A validated, paid-for (reserved) request. */
interface PreparedChat extends ValidatedChat {
  reservation: Reservation;
  /** What tokensTaken counted it against. */
  tokenLimits: RateLimit[];
}

interface ChatEnding {
  status: 'succeeded' | 'failed' | 'cancelled';
  /** What to bill; without it the reservation is released. */
  usage?: ChatUsage;
  provider?: string | null;
  error?: unknown;
}

/**
 * The gateway's side of a chat completion: validation with the spec's texts, the credit
 * reservation (an upper bound: prompt tokens plus the completion limit, at the model's token
 * prices), the hand-off to the chat service over the chat-completion queue, and the settlement
 * of the actual cost with a usage record.
 */
@Injectable()
export class ChatCompletionsService {
  constructor(
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
    private readonly access: NamespaceAccess,
    private readonly paid: PaidRequests,
    private readonly rpc: RpcClient,
    private readonly metrics: Metrics,
    private readonly limiter: RateLimiter,
    private readonly deployedModels: DeployedModels,
    private readonly stored: StoredCompletions,
    private readonly experiments: Experiments,
  ) {}

  /**
   * The catalog model named in the body, else an experiment of that name in the namespace the
   * request bills to (one of its variants), else a deployed fine-tune of that name the caller may
   * call (looked up only then, so catalog models cost nothing more), else the catalog's 404.
   */
  private async chatModel(
    caller: Caller,
    rawBody: unknown,
  ): Promise<{ model: ChatModelDefinition; deployed?: ValidatedChat['deployed']; experiment?: RoutedVariant['experiment']; scope?: NamespaceScope }> {
    try {
      return { model: resolveChatModel(this.catalog, rawBody) };
    } catch (err) {
      // Only a well-formed body naming an unknown model gets here (anything else was refused first).
      if (!(err instanceof ApiError && err.type === 'resource_not_found')) throw err;
      const body = rawBody as Record<string, unknown>;
      const name = body.model;
      if (typeof name !== 'string') throw err;
      const target = body.target_namespace;
      if (target === undefined || target === null || typeof target === 'string') {
        const scope = await this.access.resolve(caller, target);
        const routed = await this.experiments.route(caller, scope.id, name, body);
        if (routed) {
          // The variant's model is what the request is validated, served and billed as.
          body.model = routed.model.id;
          return { ...routed, scope };
        }
      }
      const found = await this.deployedModels.resolve(caller, name, (ns) => this.access.canAccess(caller, ns));
      if (!found || found.serving.endpoint !== '/chat/completions' || found.adapter.kind === 'style') throw err;
      return { model: deployedDefinition(found) as ChatModelDefinition, deployed: { serving: found.serving.id, adapter: found.adapter } };
    }
  }

  /**
   * The whole paid request: validate and reserve, hand off to the chat service, deliver, then
   * settle. What is billed when it fails: nothing when nothing reached the client; for a stream
   * that breaks off, the prompt and the completion tokens already delivered. The Responses API
   * runs on this same lifecycle (ChatOptions).
   */
  create(caller: Caller, rawBody: unknown, requestId: string, delivery: ChatDelivery, options: ChatOptions = {}): Promise<void> {
    if (!tracing.on) return this.paidRequest(caller, rawBody, requestId, delivery, options);
    // The settle runs after the answer: the request's span waits for it, so it is one of its events.
    const release = tracing.hold();
    return this.paidRequest(caller, rawBody, requestId, delivery, options).finally(release);
  }

  private async paidRequest(caller: Caller, rawBody: unknown, requestId: string, delivery: ChatDelivery, options: ChatOptions): Promise<void> {
    const chat = await this.validate(caller, rawBody, requestId, delivery, options);
    const { signal } = delivery;
    const sent: string[] = [];
    /** Chunks that arrive while the reservation is still being taken (an overlapped hand-off) wait here. */
    let early: unknown[] | undefined = [];
    const pass = (chunk: unknown) => {
      const data = typeof chunk === 'string' ? chunk : JSON.stringify(chunk);
      sent.push(data);
      delivery.chunk(data);
    };
    const onChunk = (chunk: unknown) => {
      if (signal.aborted) return;
      if (early) early.push(chunk);
      else pass(chunk);
    };
    // Named before it is taken, so the hand-off can carry it while the reservation is in flight.
    const reservationId = uuidV7();
    let paid: { reservation: Reservation; work: Promise<ChatCompletionOutcome> };
    try {
      paid = await this.paid.reserveAndStart(
        chat.scope.id,
        chat.estimate,
        reservationReference('chat', chat.completionId),
        chat.tags,
        { stage: 'chat.reserve', signal, id: reservationId, admitted: chat.tokensTaken },
        (callSignal) => this.metrics.timed('chat.rpc', () => this.run(chat, reservationId, { signal: callSignal, onChunk })),
      );
    } catch (err) {
      // Refused (402, or 429 for max_concurrent): the tokens it was counted for, if any, are given back.
      void chat.tokensTaken.then((limits) => correctTokens(this.limiter, limits, 0), () => undefined);
      throw err;
    }
    const prepared: PreparedChat = { ...chat, reservation: paid.reservation, tokenLimits: await chat.tokensTaken };
    const held = early;
    early = undefined;
    for (const chunk of held) if (!signal.aborted) pass(chunk);
    let outcome: ChatCompletionOutcome;
    try {
      outcome = await paid.work;
    } catch (error) {
      const ending: ChatEnding = { status: signal.aborted ? 'cancelled' : 'failed', usage: sent.length > 0 ? this.deliveredUsage(prepared, sent) : undefined, error };
      await this.finish(prepared, ending);
      if (prepared.experiment) await this.recordVariant(prepared, ending.status, prepared.captureId ?? answerId(prepared, firstChunk(sent)), ending.usage);
      throw error;
    }
    // What the request used and cost, on its span.
    if (tracing.on)
      tracing.annotate({
        'gen_ai.operation.name': 'chat',
        'gen_ai.request.model': prepared.model.id,
        'gen_ai.usage.input_tokens': outcome.usage.prompt_tokens,
        'gen_ai.usage.output_tokens': outcome.usage.completion_tokens,
        'atelier.cost': tokenCost(prepared.model.pricing, outcome.usage.prompt_tokens, outcome.usage.completion_tokens),
        'atelier.namespace': prepared.scope.name,
        'atelier.provider': outcome.provider,
      });
    // Kept (and counted for its experiment's variant) before the answer (or a stream's [DONE])
    // goes out, so the caller's next read, or feedback on it, finds it.
    if (prepared.experiment) {
      const answer = this.answer(prepared, outcome, sent);
      await Promise.all([prepared.keep && this.keep(prepared, prepared.keep, answer), this.recordVariant(prepared, 'succeeded', answer.id, outcome.usage)]);
    } else if (prepared.keep) await this.keep(prepared, prepared.keep, this.answer(prepared, outcome, sent));
    await this.metrics.timed('chat.deliver', () => delivery.deliver(outcome.completion));
    // Settled right after the answer went out, off the caller's latency; the reservation
    // already guaranteed the credits.
    await this.metrics.timed('chat.settle', () => this.finish(prepared, { status: 'succeeded', usage: outcome.usage, provider: outcome.provider }));
  }

  private async validate(caller: Caller, rawBody: unknown, requestId: string, delivery: ChatDelivery, options: ChatOptions): Promise<ValidatedChat> {
    const validating = this.metrics.stage('chat.validate');
    const { model, deployed, experiment, scope: routedIn } = await this.chatModel(caller, rawBody);
    // The body was parsed for this request alone (an Idempotency-Key's hash of it is taken before), so defaults go into it.
    const { request, body, promptTokens } = parseChatRequest(model, rawBody, { inPlace: true, clampMaxTokens: options.clampMaxTokens });
    // An experiment was looked up in the namespace the request bills to: resolved once.
    const scope = routedIn ?? (await this.access.resolve(caller, body.target_namespace));
    // Only the chat route keeps completions (the Responses API has its own store).
    // An experiment with a metric keeps its answers by default, so feedback can be given on them.
    // Messages (ChatOptions.capture) has no store field of OpenAI's: only sampling or an experiment keeps it.
    const keep =
      options.endpoint === undefined
        ? storeDecision(caller, scope.id, body, { storeByDefault: experiment?.storeByDefault })
        : options.capture
          ? storeDecision(caller, scope.id, {}, { storeByDefault: experiment?.storeByDefault })
          : undefined;
    if (experiment) {
      delivery.header('x-atelier-experiment', experiment.name);
      delivery.header('x-atelier-variant', experiment.variant);
    }
    validating();
    const completionId = `chatcmpl-${randomToken(18)}`;
    // Counted for its upper bound (prompt plus completion limit, what the reservation covers), corrected when it settles.
    const tokens = promptTokens + request.maxTokens;
    const tokensTaken = takeTokens(this.limiter, this.metrics, caller, tokens, (name, value) => delivery.header(name, value), (limit) =>
      `This request may use ${tokens} tokens (prompt plus max_tokens), more than the ${limit.limit} tokens per minute of ${limit.name}; lower max_tokens`,
    );
    // Awaited with the slots (PaidRequests.reserveAndStart); a refusal is reported there.
    tokensTaken.catch(() => undefined);
    const estimate = tokenCost(model.pricing, promptTokens, request.maxTokens);
    const tags = chargeTags(caller, model.id, options.endpoint ?? CHAT_ENDPOINT);
    // A deployed fine-tune is served through its adapter, which only the chat route carries.
    const responses = deployed ? undefined : options.responses?.(model, request.maxTokens);
    const messages = deployed ? undefined : options.messages?.(model);
    options.validated?.({ promptTokens, maxTokens: request.maxTokens, model });
    return { completionId, caller, scope, model, deployed, request, body, responses, messages, promptTokens, estimate, tags, requestId, startedAt: performance.now(), tokensTaken, keep, experiment, captureId: options.capture?.id };
  }

  /**
   * The answer as a chat.completion (a stream assembled whole; a native Anthropic answer translated)
   * and the id the caller knows it by: what a stored completion keeps and feedback names.
   */
  private answer(prepared: PreparedChat, outcome: ChatCompletionOutcome, sent: readonly string[]): { id: string; completion: Record<string, unknown> } {
    const fallback = { id: prepared.captureId ?? prepared.completionId, model: prepared.model.id };
    // A native Messages upstream answered in Anthropic's shapes.
    if (prepared.messages) return completionFromMessages(outcome.completion, sent, outcome.usage, fallback);
    const completion = outcome.completion ?? assembleStreamedCompletion(sent, outcome.usage, fallback);
    const id = prepared.captureId ?? answerId(prepared, completion);
    return { id, completion: { ...completion, id } };
  }

  private keep(prepared: PreparedChat, decision: StoreDecision, answer: { id: string; completion: Record<string, unknown> }): Promise<void> {
    return this.stored.keep({
      id: answer.id,
      namespaceId: prepared.scope.id,
      userId: prepared.caller.userId,
      model: prepared.model.id,
      metadata: decision.metadata,
      messages: storedMessages(answer.id, prepared.body.messages as Record<string, unknown>[]),
      request: storedRequest(prepared.body),
      completion: answer.completion,
      requestId: prepared.requestId,
    });
  }

  private run(prepared: ValidatedChat, reservationId: string, opts: { signal: AbortSignal; onChunk: (chunk: unknown) => void }): Promise<ChatCompletionOutcome> {
    const { caller, scope } = prepared;
    return this.rpc.call(
      CHAT_COMPLETION_QUEUE,
      {
        caller: { userId: caller.userId, username: caller.username, namespaceId: scope.id, namespace: scope.name, requestId: prepared.requestId },
        model: prepared.deployed?.serving ?? prepared.model.id,
        ...(prepared.deployed && { deployed: { name: prepared.model.id, adapter: prepared.deployed.adapter } }),
        body: prepared.body,
        ...(prepared.responses && { responses: prepared.responses }),
        ...(prepared.messages && { messages: prepared.messages.body, ...(prepared.messages.beta && { anthropicBeta: prepared.messages.beta }) }),
        limits: { promptTokens: prepared.promptTokens, maxTokens: prepared.request.maxTokens, maxTokensExplicit: prepared.request.maxTokensExplicit },
        reservationId,
        completionId: prepared.completionId,
      },
      opts,
    );
  }

  /**
   * Charges the tokens used (or releases the reservation) with the request's record, in one
   * statement. Never throws, and never makes the caller wait for an outage (PaidRequests.close):
   * an answer already delivered is still charged exactly once, its record with it.
   */
  private async finish(prepared: PreparedChat, ending: ChatEnding): Promise<void> {
    // None used when nothing was delivered.
    correctTokens(this.limiter, prepared.tokenLimits, ending.usage ? ending.usage.prompt_tokens + ending.usage.completion_tokens : 0);
    const cost = ending.usage ? tokenCost(prepared.model.pricing, ending.usage.prompt_tokens, ending.usage.completion_tokens) : null;
    await this.paid.close(prepared.reservation, cost, {
      inputTokens: ending.usage?.prompt_tokens ?? 0,
      outputTokens: ending.usage?.completion_tokens ?? 0,
      request: {
        outcome: ending.status,
        userId: prepared.caller.userId,
        provider: ending.provider ?? null,
        stream: prepared.request.stream,
        requestId: prepared.requestId,
        errorMessage: ending.error === undefined ? null : errorText(ending.error),
        durationMs: performance.now() - prepared.startedAt,
      },
    });
  }

  /** The request as its experiment's statistics count it: its variant, how it ended, its latency and cost. Never throws. */
  private recordVariant(prepared: ValidatedChat, outcome: ChatEnding['status'], completionId: string, usage: ChatUsage | undefined): Promise<void> {
    const experiment = prepared.experiment!;
    return this.experiments.record({
      experimentId: experiment.id,
      variant: experiment.variant,
      completionId,
      outcome,
      durationMs: performance.now() - prepared.startedAt,
      cost: usage ? tokenCost(prepared.model.pricing, usage.prompt_tokens, usage.completion_tokens) : null,
    });
  }

  /**
   * Usage of a stream that ended early (client gone, provider failed): the prompt plus the
   * completion tokens actually delivered, counted from the chunks that went out.
   */
  private deliveredUsage(prepared: PreparedChat, chunks: readonly string[]): ChatUsage {
    let content = '';
    const calls: { id: string; type: 'function'; function: { name: string; arguments: string } }[] = [];
    for (const raw of chunks) {
      try {
        const chunk = JSON.parse(raw) as {
          usage?: ChatUsage | null;
          choices?: { delta?: { content?: string | null; tool_calls?: { index: number; function?: { name?: string; arguments?: string } }[] } }[];
          /** An Anthropic event (a native Messages stream). */
          type?: string;
          delta?: { text?: string; partial_json?: string; thinking?: string };
        };
        if (chunk.usage && typeof chunk.usage.completion_tokens === 'number') return chunk.usage;
        if (chunk.type === 'content_block_delta') content += chunk.delta?.text ?? chunk.delta?.partial_json ?? chunk.delta?.thinking ?? '';
        for (const choice of chunk.choices ?? []) {
          if (typeof choice.delta?.content === 'string') content += choice.delta.content;
          for (const tc of choice.delta?.tool_calls ?? []) {
            const slot = (calls[tc.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
            slot.function.name += tc.function?.name ?? '';
            slot.function.arguments += tc.function?.arguments ?? '';
          }
        }
      } catch {
        // not a chunk we can read; nothing to count
      }
    }
    const completion = countTextTokens(content) + toolCallTokens(calls.filter(Boolean));
    return { prompt_tokens: prepared.promptTokens, completion_tokens: completion, total_tokens: prepared.promptTokens + completion };
  }
}

/** The id an answer goes by (what a stored completion and feedback name): the upstream's chatcmpl- id, else atelier's. */
function answerId(prepared: ValidatedChat, completion: Record<string, unknown> | undefined): string {
  const id = completion?.id;
  return typeof id === 'string' && id.startsWith('chatcmpl-') ? id : prepared.completionId;
}

/** A stream's first chunk, which carries the answer's id. */
function firstChunk(sent: readonly string[]): Record<string, unknown> | undefined {
  try {
    return sent.length > 0 ? (JSON.parse(sent[0]) as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function errorText(err: unknown): string {
  if (err instanceof ApiError) return err.message;
  return (err as Error)?.message ?? String(err);
}
