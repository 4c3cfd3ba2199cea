import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, secretFromEnv, type AppConfig } from '@atelier/config';
import { ApiError, type ChatCompletionJob, type ChatCompletionOutcome } from '@atelier/contracts';
import { LoraAdapters, ModelCatalog, type ChatModelDefinition } from '@atelier/models';
import { Metrics, SpanKind, tracing } from '@atelier/observability';
import { genAiProvider } from './gen-ai-provider';
import { chatRequestFrom, parseChatRequest, providerBody } from './chat-request';
import { ChatMediaInspector } from './local-chat/chat-media-inspector';
import { LocalChatProvider } from './local-chat/local-chat.provider';
import type { ChatProvider, ChatProviderCall } from './providers/chat-provider';
import { AnthropicProvider } from './providers/anthropic.provider';
import { OpenAiCompatibleProvider } from './providers/openai-compatible.provider';
import { BlobStore, ParsedBlobs } from '@atelier/storage';
import { parseNgramCounts } from '@atelier/ngram';
import { AdaptedMarkovModel, localChatModel, type MarkovModel } from './local-chat/markov-model';

export interface ChatRunContext {
  signal: AbortSignal;
  sendChunk(chunkJson: string): Promise<void>;
}

/**
 * The chat service's side of a completion: reads the request (the job carries the body the
 * gateway validated and its token limits), picks the provider of the model's engine, and runs it, streaming chunks
 * back through the job context.
 */
@Injectable()
export class ChatCompletionRunner {
  private readonly local: LocalChatProvider;
  private readonly openAiCompatible: OpenAiCompatibleProvider;
  private readonly anthropic: AnthropicProvider;

  constructor(
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly metrics: Metrics,
    blobs: BlobStore,
    lora: LoraAdapters,
  ) {
    // Deployed fine-tunes' counts, loaded once, over the base corpus's model.
    const adapted = new ParsedBlobs<MarkovModel>(blobs, (text) => new AdaptedMarkovModel(parseNgramCounts(text), localChatModel()), 32);
    this.local = new LocalChatProvider(new ChatMediaInspector(config), (key) => adapted.get(key));
    this.openAiCompatible = new OpenAiCompatibleProvider(secretFromEnv, (serving, name) => lora.reload(serving, name));
    this.anthropic = new AnthropicProvider(secretFromEnv);
  }

  async run(job: ChatCompletionJob, ctx: ChatRunContext): Promise<ChatCompletionOutcome> {
    if (!tracing.on) return this.answer(job, ctx);
    return this.traced(job, ctx);
  }

  /**
   * run() with tracing on: the model call is a client span with the GenAI semantic conventions'
   * attributes (the prompt and completion only with OTEL_GENAI_CAPTURE_CONTENT), current while the
   * provider runs, so the upstream request carries its traceparent.
   */
  private async traced(job: ChatCompletionJob, ctx: ChatRunContext): Promise<ChatCompletionOutcome> {
    const name = job.deployed?.name ?? job.model;
    const serving = this.catalog.get(job.model);
    const span = tracing.startSpan(`chat ${name}`, {
      kind: SpanKind.CLIENT,
      attributes: {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': serving ? genAiProvider(serving) : 'unknown',
        'gen_ai.request.model': name,
        'gen_ai.request.max_tokens': job.limits?.maxTokens ?? 0,
        ...(typeof job.body.temperature === 'number' && { 'gen_ai.request.temperature': job.body.temperature }),
        'atelier.namespace': job.caller.namespace,
        ...(tracing.captureContent && { 'gen_ai.input.messages': JSON.stringify(job.body.messages ?? job.responses?.input ?? null) }),
      },
    })!;
    const finishReasons = new Set<string>();
    let text = '';
    const watched: ChatRunContext = {
      signal: ctx.signal,
      sendChunk: (chunk) => {
        for (const match of chunk.matchAll(/"finish_reason":"([a-z_]+)"/g)) finishReasons.add(match[1]);
        if (tracing.captureContent) for (const match of chunk.matchAll(/"content":("(?:[^"\\]|\\.)*")/g)) text += JSON.parse(match[1]) as string;
        return ctx.sendChunk(chunk);
      },
    };
    return tracing.traced(span, () => this.answer(job, watched), (outcome) => {
      const completion = outcome.completion as { model?: string; choices?: { finish_reason?: string; message?: { content?: string | null } }[] } | null;
      for (const choice of completion?.choices ?? []) if (choice.finish_reason) finishReasons.add(choice.finish_reason);
      if (tracing.captureContent && completion) text = completion.choices?.[0]?.message?.content ?? '';
      return {
        'gen_ai.response.model': completion?.model ?? name,
        'gen_ai.usage.input_tokens': outcome.usage.prompt_tokens,
        'gen_ai.usage.output_tokens': outcome.usage.completion_tokens,
        'gen_ai.response.finish_reasons': [...finishReasons],
        'atelier.provider': outcome.provider,
        ...(tracing.captureContent && { 'gen_ai.output.messages': JSON.stringify([{ role: 'assistant', content: text }]) }),
      };
    });
  }

  private async answer(job: ChatCompletionJob, ctx: ChatRunContext): Promise<ChatCompletionOutcome> {
    const serving = this.catalog.get(job.model);
    if (!serving || serving.endpoint !== '/chat/completions') throw new ApiError('resource_not_found', `Model not found: ${job.model}`);
    // A deployed fine-tune answers under its own name, served by its catalog model with its adapter.
    const model = job.deployed ? { ...serving, id: job.deployed.name } : serving;
    // The gateway validated and counted this body; it is read, not checked again. A job from a
    // gateway older than `limits` (a rolling upgrade) is parsed here as before.
    const { request, promptTokens } = job.limits
      ? { request: chatRequestFrom(model.id, job.body, job.limits), promptTokens: job.limits.promptTokens }
      : parseChatRequest(model, job.body);
    const call: ChatProviderCall = {
      model,
      request,
      body: providerBody(job.body),
      promptTokens,
      completionId: job.completionId,
      created: Math.floor(Date.now() / 1000),
      signal: ctx.signal,
      ...(job.deployed && { adapter: job.deployed.adapter }),
    };
    if (job.responses) {
      // Only the gateway's check of the engine's responses_api sends this; an engine changed since is refused.
      if (model.engine.type !== 'openai-compatible' || !model.engine.responses_api)
        throw new ApiError('service_unavailable', `Model ${model.id} no longer speaks the Responses API; send the request again`);
      const body = job.responses;
      const answered = await this.metrics.timed('chat.provider', () => this.openAiCompatible.responses(call, body, request.stream ? ctx.sendChunk : undefined));
      return { completion: answered.response, usage: answered.usage, provider: answered.provider };
    }
    if (job.messages) {
      // Only the gateway's check of the engine sends this; an engine changed since is refused.
      if (model.engine.type !== 'anthropic') throw new ApiError('service_unavailable', `Model ${model.id} no longer speaks the Messages API; send the request again`);
      const body = job.messages;
      const answered = await this.metrics.timed('chat.provider', () => this.anthropic.messages(call, body, job.anthropicBeta, request.stream ? ctx.sendChunk : undefined));
      return { completion: answered.message, usage: answered.usage, provider: answered.provider };
    }
    const provider = this.providerFor(model);
    if (request.stream) {
      const streamed = await this.metrics.timed('chat.provider', () => provider.stream(call, ctx.sendChunk));
      return { completion: null, usage: streamed.usage, provider: streamed.provider };
    }
    const answered = await this.metrics.timed('chat.provider', () => provider.complete(call));
    return { completion: answered.completion, usage: answered.completion.usage, provider: answered.provider };
  }

  private providerFor(model: ChatModelDefinition): ChatProvider {
    const engine = model.engine;
    if (engine.type === 'builtin' && engine.name === 'local-chat') return this.local;
    if (engine.type === 'openai-compatible') return this.openAiCompatible;
    if (engine.type === 'anthropic') return this.anthropic;
    throw new ApiError('service_unavailable', `Model ${model.id} uses the ${engine.type} engine, which the chat service does not run`);
  }
}
