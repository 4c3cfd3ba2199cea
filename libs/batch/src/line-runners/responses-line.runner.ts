import { Injectable } from '@nestjs/common';
import { completionOutput, finishResponse, parseChatRequest, responseShell, translateResponsesRequest, type ChatCompletion } from '@atelier/chat';
import { ApiError } from '@atelier/contracts';
import type { ChatModelDefinition, ModelDefinition } from '@atelier/models';
import { randomToken } from '@atelier/random';
import type { BatchLineRunner, LineAnswer, LineCaller, LinePlan } from './batch-line-runner';
import { ChatLineRunner, planned, unstreamed } from './chat-line.runner';

/** A batch line is one request on its own: it neither continues a stored conversation nor runs in the background. */
function standalone(raw: Record<string, unknown>): Record<string, unknown> {
  if (raw.previous_response_id !== undefined && raw.previous_response_id !== null)
    throw ApiError.badRequest('previous_response_id cannot be used in a batch: each line is a request of its own', { fields: [{ field: 'previous_response_id', message: 'not in a batch' }] });
  const { background: _background, ...rest } = unstreamed(raw);
  return rest;
}

/**
 * `/v1/responses` lines: the Responses route's translation to chat (input items, tools, text
 * format), the chat checks and price bound, the chat service's answer translated back into a
 * Response. Not stored (a batch's answers are its output file).
 */
@Injectable()
export class ResponsesLineRunner implements BatchLineRunner {
  constructor(private readonly chat: ChatLineRunner) {}

  model(name: string): ChatModelDefinition | undefined {
    return this.chat.model(name);
  }

  plan(model: ModelDefinition, raw: Record<string, unknown>): LinePlan {
    return planned(() => {
      const body = standalone(raw);
      const { chatBody } = translateResponsesRequest(body, []);
      const chat = model as ChatModelDefinition;
      const { request, promptTokens } = parseChatRequest(chat, chatBody);
      return { body, estimate: this.chat.cost(chat, { prompt_tokens: promptTokens, completion_tokens: request.maxTokens }) };
    });
  }

  async run(model: ModelDefinition, raw: Record<string, unknown>, caller: LineCaller, ids: { requestId: string; reservationId: string }): Promise<LineAnswer> {
    const body = standalone(raw);
    const translated = translateResponsesRequest(body, []);
    const chat = model as ChatModelDefinition;
    const { completion, usage, provider } = await this.chat.complete(chat, translated.chatBody, caller, ids);
    const shell = responseShell(`resp_${randomToken(24)}`, body, false);
    const { output, finishReason } = completionOutput(completion as unknown as ChatCompletion, translated.tools);
    const response = finishResponse({ ...shell, model: (completion.model as string | undefined) ?? shell.model }, output, usage, finishReason);
    return { body: response, inputTokens: usage.prompt_tokens, outputTokens: usage.completion_tokens, cost: this.chat.cost(chat, usage), provider };
  }
}
