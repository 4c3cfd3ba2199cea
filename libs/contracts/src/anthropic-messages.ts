import { z } from 'zod';

/**
 * Anthropic's Messages API request (POST /api/anthropic/v1/messages and .../count_tokens), as
 * far as atelier reads it: the validator, the type and the OpenAPI request schema come from here.
 * Objects are loose: Anthropic adds fields (betas) faster than any gateway learns them, and a field
 * a chat upstream has no counterpart for is accepted and left out, never refused. What is checked
 * is what would change the answer or break the translation, each refusal naming its field.
 */

const cacheControl = z.looseObject({ type: z.string() }).nullish();

export const AnthropicTextBlock = z.looseObject({
  type: z.literal('text'),
  text: z.string({ error: 'text must be a string' }),
  cache_control: cacheControl,
});

const imageSource = z.discriminatedUnion(
  'type',
  [
    z.looseObject({
      type: z.literal('base64'),
      media_type: z.string({ error: 'media_type must be an image type such as image/png' }),
      data: z.string({ error: 'data must be the base64 of the image' }),
    }),
    z.looseObject({ type: z.literal('url'), url: z.string({ error: 'url must be a string' }).url('url must be an absolute URL') }),
  ],
  { error: 'source.type must be base64 or url' },
);

export const AnthropicImageBlock = z.looseObject({ type: z.literal('image'), source: imageSource, cache_control: cacheControl });

export const AnthropicToolUseBlock = z.looseObject({
  type: z.literal('tool_use'),
  id: z.string({ error: 'id must be a string' }).min(1, 'id must not be empty'),
  name: z.string({ error: 'name must be a string' }).min(1, 'name must not be empty'),
  input: z.record(z.string(), z.unknown(), { error: 'input must be an object' }),
  cache_control: cacheControl,
});

export const AnthropicToolResultBlock = z.looseObject({
  type: z.literal('tool_result'),
  tool_use_id: z.string({ error: 'tool_use_id must be a string' }).min(1, 'tool_use_id must not be empty'),
  content: z.union([z.string(), z.array(z.union([AnthropicTextBlock, AnthropicImageBlock, z.looseObject({ type: z.string() })]))], { error: 'content must be a string or an array of blocks' }).optional(),
  is_error: z.boolean({ error: 'is_error must be a boolean' }).optional(),
  cache_control: cacheControl,
});

export const AnthropicThinkingBlock = z.looseObject({ type: z.literal('thinking'), thinking: z.string({ error: 'thinking must be a string' }), signature: z.string().optional() });
export const AnthropicRedactedThinkingBlock = z.looseObject({ type: z.literal('redacted_thinking'), data: z.string({ error: 'data must be a string' }) });

/** Blocks of Anthropic's own tools (web search, code execution) and documents: accepted, carried as far as a chat upstream can. */
const otherBlock = z.looseObject({
  type: z.enum(['document', 'search_result', 'server_tool_use', 'web_search_tool_result', 'web_fetch_tool_result', 'code_execution_tool_result', 'mcp_tool_use', 'mcp_tool_result', 'container_upload'], {
    error: 'type must be one of text, image, tool_use, tool_result, thinking, redacted_thinking, document',
  }),
});

export const AnthropicContentBlock = z.union([
  z.discriminatedUnion('type', [AnthropicTextBlock, AnthropicImageBlock, AnthropicToolUseBlock, AnthropicToolResultBlock, AnthropicThinkingBlock, AnthropicRedactedThinkingBlock]),
  otherBlock,
]);
export type AnthropicContentBlock = z.infer<typeof AnthropicContentBlock>;

export const AnthropicMessageParam = z.looseObject({
  role: z.enum(['user', 'assistant', 'system'], { error: 'role must be user, assistant or system' }),
  content: z.union([z.string(), z.array(AnthropicContentBlock)], { error: 'content must be a string or an array of content blocks' }),
});
export type AnthropicMessageParam = z.infer<typeof AnthropicMessageParam>;

export const AnthropicTool = z.looseObject({
  name: z.string({ error: 'name must be a string' }).min(1, 'name must not be empty').max(128, 'name must be at most 128 characters'),
  /** Absent or `custom`: the caller's tool. Any other (web_search_20250305, bash_20250124...) is one Anthropic runs. */
  type: z.string().nullish(),
  description: z.string({ error: 'description must be a string' }).optional(),
  input_schema: z.looseObject({ type: z.string().optional() }, { error: 'input_schema must be a JSON Schema object' }).optional(),
  cache_control: cacheControl,
  defer_loading: z.boolean().optional(),
});
export type AnthropicTool = z.infer<typeof AnthropicTool>;

export const AnthropicToolChoice = z.discriminatedUnion(
  'type',
  [
    z.looseObject({ type: z.literal('auto'), disable_parallel_tool_use: z.boolean().optional() }),
    z.looseObject({ type: z.literal('any'), disable_parallel_tool_use: z.boolean().optional() }),
    z.looseObject({ type: z.literal('tool'), name: z.string({ error: 'name must name a declared tool' }), disable_parallel_tool_use: z.boolean().optional() }),
    z.looseObject({ type: z.literal('none') }),
  ],
  { error: 'tool_choice.type must be auto, any, tool or none' },
);

const system = z.union([z.string(), z.array(AnthropicTextBlock)], { error: 'system must be a string or an array of text blocks' });

/** The fields count_tokens reads (the request without max_tokens and the sampling settings). */
export const AnthropicCountTokensRequest = z.looseObject({
  model: z.string({ error: 'model: Field required' }).min(1, 'model must not be empty'),
  messages: z.array(AnthropicMessageParam, { error: 'messages must be an array of messages' }),
  system: system.optional(),
  tools: z.array(AnthropicTool, { error: 'tools must be an array of tools' }).optional(),
  tool_choice: AnthropicToolChoice.optional(),
  thinking: z.looseObject({ type: z.string() }).nullish(),
});
export type AnthropicCountTokensRequest = z.infer<typeof AnthropicCountTokensRequest>;

export const AnthropicMessagesRequest = AnthropicCountTokensRequest.extend({
  max_tokens: z.number({ error: 'max_tokens: Field required (an integer of at least 1)' }).int('max_tokens must be an integer').min(1, 'max_tokens must be at least 1'),
  stream: z.boolean({ error: 'stream must be a boolean' }).optional(),
  temperature: z.number({ error: 'temperature must be a number' }).min(0, 'temperature must be between 0 and 1').max(1, 'temperature must be between 0 and 1').optional(),
  top_p: z.number({ error: 'top_p must be a number' }).min(0).max(1).optional(),
  top_k: z.number({ error: 'top_k must be a number' }).int().min(0).optional(),
  stop_sequences: z.array(z.string(), { error: 'stop_sequences must be an array of strings' }).max(8, 'stop_sequences may hold at most 8 sequences').optional(),
  metadata: z.looseObject({ user_id: z.string({ error: 'metadata.user_id must be a string' }).max(512, 'metadata.user_id must be at most 512 characters').nullish() }).optional(),
  thinking: z
    .discriminatedUnion(
      'type',
      [
        z.looseObject({ type: z.literal('enabled'), budget_tokens: z.number({ error: 'budget_tokens must be an integer' }).int().min(1024, 'budget_tokens must be at least 1024') }),
        z.looseObject({ type: z.literal('adaptive') }),
        z.looseObject({ type: z.literal('disabled') }),
      ],
      { error: 'thinking.type must be enabled, adaptive or disabled' },
    )
    .nullish(),
  output_config: z.looseObject({ effort: z.enum(['low', 'medium', 'high', 'max'], { error: 'output_config.effort must be low, medium, high or max' }).optional() }).optional(),
});
export type AnthropicMessagesRequest = z.infer<typeof AnthropicMessagesRequest>;
