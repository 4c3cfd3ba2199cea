import { ApiError } from '@atelier/contracts';
import type { ChatCompletion, ChatCompletionChunk, ChatRequest } from '../chat-types';
import { usageChunk, usageOf, type ChatProvider, type ChatProviderCall, type ChunkSink, type ProviderCompletion, type ProviderStream } from '../providers/chat-provider';
import { generateLocalChat, type MediaDescription } from './local-chat-generator';
import type { MarkovModel } from './markov-model';

/** Looks at the image/video parts of a request (downloads them through the SSRF guard). */
export interface MediaInspector {
  describe(request: ChatRequest, signal: AbortSignal): Promise<MediaDescription[]>;
}

export const PROVIDER_LOCAL_CHAT = 'builtin:local-chat';

function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new ApiError('timeout', 'The request was cancelled');
}

/** The built-in offline model as a provider: generation is in-process and synchronous. */
export class LocalChatProvider implements ChatProvider {
  constructor(
    private readonly media: MediaInspector,
    /** A deployed fine-tune's model, by the blob key of its checkpoint's counts. */
    private readonly adapted?: (key: string) => Promise<MarkovModel>,
  ) {}

  private async modelFor(call: ChatProviderCall): Promise<MarkovModel | undefined> {
    if (call.adapter?.kind !== 'ngram') return undefined;
    if (!this.adapted) throw new ApiError('service_unavailable', `Model ${call.model.id} needs its fine-tuned counts, which this chat service cannot load`);
    return this.adapted(call.adapter.key);
  }

  async complete(call: ChatProviderCall): Promise<ProviderCompletion> {
    const out = generateLocalChat(call.request, await this.media.describe(call.request, call.signal), await this.modelFor(call));
    throwIfAborted(call.signal);
    const completion: ChatCompletion = {
      id: call.completionId,
      object: 'chat.completion',
      created: call.created,
      model: call.model.id,
      system_fingerprint: 'atelier-local-chat',
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: out.content, ...(out.toolCalls.length > 0 ? { tool_calls: out.toolCalls } : {}), refusal: null },
          finish_reason: out.finishReason,
          logprobs: null,
        },
      ],
      usage: usageOf(call.promptTokens, out.completionTokens),
    };
    return { completion, provider: PROVIDER_LOCAL_CHAT };
  }

  async stream(call: ChatProviderCall, emit: ChunkSink): Promise<ProviderStream> {
    const out = generateLocalChat(call.request, await this.media.describe(call.request, call.signal), await this.modelFor(call));
    const chunk = (delta: ChatCompletionChunk['choices'][number]['delta'], finish: ChatCompletionChunk['choices'][number]['finish_reason'] = null) =>
      JSON.stringify({
        id: call.completionId,
        object: 'chat.completion.chunk',
        created: call.created,
        model: call.model.id,
        system_fingerprint: 'atelier-local-chat',
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      } satisfies ChatCompletionChunk);

    throwIfAborted(call.signal);
    await emit(chunk({ role: 'assistant', content: out.toolCalls.length > 0 ? null : '' }));
    for (const piece of out.pieces) {
      throwIfAborted(call.signal);
      await emit(chunk({ content: piece }));
    }
    for (const [index, tc] of out.toolCalls.entries()) {
      throwIfAborted(call.signal);
      // Same shape as OpenAI: the first delta names the call, the arguments follow.
      await emit(chunk({ tool_calls: [{ index, id: tc.id, type: 'function', function: { name: tc.function.name, arguments: '' } }] }));
      await emit(chunk({ tool_calls: [{ index, function: { arguments: tc.function.arguments } }] }));
    }
    await emit(chunk({}, out.finishReason));
    const usage = usageOf(call.promptTokens, out.completionTokens);
    await emit(usageChunk(call, usage));
    return { usage, provider: PROVIDER_LOCAL_CHAT };
  }
}
