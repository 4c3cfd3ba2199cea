import * as fs from 'node:fs';
import * as path from 'node:path';
import type { ApiError } from '@atelier/contracts';
import { translateCountTokensRequest, translateMessagesRequest, type MessagesTarget } from './messages-request';

/** A request the Claude Code CLI 2.1.328 sent (recorded offline; copied from the spec's shared fixtures). */
const captured = (name: string) =>
  (JSON.parse(fs.readFileSync(path.join(__dirname, 'fixtures', `claude-code-2.1.328-messages-${name}.json`), 'utf8')) as { body: Record<string, unknown> }).body;

const local: MessagesTarget = { id: 'local-chat', maxTokens: 8192, reasoning: false };
const refusal = (fn: () => unknown): { status: number; message: string; fields: { field: string }[] } => {
  try {
    fn();
  } catch (err) {
    const e = err as ApiError;
    return { status: e.status, message: e.message, fields: (e.detail as { fields: { field: string }[] }).fields };
  }
  throw new Error('expected a refusal');
};
const user = (content: unknown) => ({ role: 'user', content });

describe('translateMessagesRequest', () => {
  it("carries Claude Code's first request whole: the system blocks, the twelve tools, a ceiling max_tokens and the stream's usage", () => {
    const body = captured('request');
    const { chatBody, model, stream, droppedTools } = translateMessagesRequest(body, local);
    expect(model).toBe('my-model');
    expect(stream).toBe(true);
    expect(droppedTools).toEqual([]);
    const system = (body.system as { text: string }[]).map((b) => b.text).join('\n\n');
    expect(chatBody).toMatchObject({ model: 'local-chat', max_tokens: 8192, stream: true, stream_options: { include_usage: true }, user: (body.metadata as { user_id: string }).user_id });
    const messages = chatBody.messages as { role: string; content: unknown }[];
    expect(messages[0]).toEqual({ role: 'system', content: system });
    // The user's turn, then the environment as a system message in the middle, where Claude Code put it.
    expect(messages.slice(1)).toEqual([
      { role: 'user', content: expect.stringContaining('please write a file hello.txt') },
      { role: 'system', content: expect.stringMatching(/^# Environment/) },
    ]);
    const tools = chatBody.tools as { type: string; function: { name: string; parameters: unknown } }[];
    expect(tools.map((t) => t.function.name)).toEqual((body.tools as { name: string }[]).map((t) => t.name));
    expect(tools.find((t) => t.function.name === 'Write')!.function.parameters).toEqual((body.tools as { name: string; input_schema: unknown }[]).find((t) => t.name === 'Write')!.input_schema);
    // Nothing of Anthropic's own reaches a chat upstream.
    expect(JSON.stringify(chatBody)).not.toMatch(/cache_control|context_management|output_config|defer_loading|"thinking"/);
    // A model that takes reasoning_effort gets the effort.
    expect(translateMessagesRequest(body, { id: 'r', reasoning: true }).chatBody).toMatchObject({ reasoning_effort: 'high', max_tokens: 32000 });
  });

  it('carries the tool round trip in order: a system turn keeps its place, the tool_use is one call, its result one tool message', () => {
    const body = captured('tool-result-request');
    const messages = translateMessagesRequest(body, local).chatBody.messages as { role: string; content: unknown; tool_calls?: unknown; tool_call_id?: string }[];
    expect(messages.map((m) => m.role)).toEqual(['system', 'user', 'system', 'assistant', 'tool']);
    expect(messages[2].content).toMatch(/^# Environment/);
    expect(messages[3]).toEqual({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'toolu_01', type: 'function', function: { name: 'Write', arguments: JSON.stringify({ file_path: '/home/dev/project/hello.txt', content: 'written through the gateway\n' }) } }],
    });
    expect(messages[4]).toEqual({ role: 'tool', tool_call_id: 'toolu_01', content: expect.stringMatching(/^File created successfully/) });
    expect(messages.filter((m) => m.role === 'tool')).toHaveLength(1);
  });

  it('turns images into image parts, leaves thinking out, marks a failed tool result, and names the server tools it drops', () => {
    const { chatBody, droppedTools } = translateMessagesRequest(
      {
        model: 'm',
        max_tokens: 100,
        tools: [{ name: 'lookup', input_schema: { type: 'object', properties: {} } }, { type: 'web_search_20250305', name: 'web_search' }],
        tool_choice: { type: 'any', disable_parallel_tool_use: true },
        messages: [
          user([{ type: 'text', text: 'look' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }, { type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }]),
          { role: 'assistant', content: [{ type: 'thinking', thinking: 'hmm', signature: 'sig' }, { type: 'redacted_thinking', data: 'x' }, { type: 'tool_use', id: 't1', name: 'lookup', input: { q: 1 } }] },
          user([{ type: 'tool_result', tool_use_id: 't1', is_error: true, content: [{ type: 'text', text: 'no such thing' }] }, { type: 'text', text: 'try again' }]),
          { role: 'assistant', content: [{ type: 'thinking', thinking: 'only thinking', signature: 's' }] },
          user('ok'),
        ],
      },
      local,
    );
    expect(droppedTools).toEqual(['web_search_20250305']);
    expect(chatBody).toMatchObject({ tool_choice: 'required', parallel_tool_calls: false, tools: [{ type: 'function', function: { name: 'lookup' } }] });
    expect(chatBody.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }, { type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 't1', type: 'function', function: { name: 'lookup', arguments: '{"q":1}' } }] },
      { role: 'tool', tool_call_id: 't1', content: 'Error: no such thing' },
      { role: 'user', content: 'try again' },
      { role: 'user', content: 'ok' },
    ]);
  });

  it('refuses with a 400 naming the field: no max_tokens, an unknown block, a tool_result without its tool_use, twice answered, an undeclared tool_choice', () => {
    expect(refusal(() => translateMessagesRequest({ model: 'm', messages: [user('hi')] }, local))).toMatchObject({ status: 400, fields: [{ field: 'max_tokens' }], message: expect.stringContaining('max_tokens: Field required') });
    expect(refusal(() => translateMessagesRequest({ model: 'm', max_tokens: 10, messages: [user([{ type: 'video', url: 'x' }])] }, local))).toMatchObject({
      status: 400,
      fields: [{ field: 'messages[0].content[0].type' }],
      message: 'messages[0].content[0].type: type must be one of text, image, tool_use, tool_result, thinking, redacted_thinking, document',
    });
    expect(refusal(() => translateMessagesRequest({ model: 'm', max_tokens: 10, messages: [user([{ type: 'tool_result', tool_use_id: 'nope', content: 'x' }])] }, local))).toMatchObject({
      status: 400,
      fields: [{ field: 'messages[0].content[0].tool_use_id' }],
      message: expect.stringContaining("'nope' does not answer a tool_use block"),
    });
    const call = { role: 'assistant', content: [{ type: 'tool_use', id: 't', name: 'f', input: {} }] };
    const twice = user([{ type: 'tool_result', tool_use_id: 't', content: 'a' }, { type: 'tool_result', tool_use_id: 't', content: 'b' }]);
    expect(refusal(() => translateMessagesRequest({ model: 'm', max_tokens: 10, messages: [user('go'), call, twice] }, local)).message).toContain('answered twice');
    expect(refusal(() => translateMessagesRequest({ model: 'm', max_tokens: 10, tools: [{ name: 'f', input_schema: { type: 'object' } }], tool_choice: { type: 'tool', name: 'g' }, messages: [user('hi')] }, local))).toMatchObject({
      fields: [{ field: 'tool_choice.name' }],
    });
    expect(refusal(() => translateMessagesRequest({ model: 'm', max_tokens: 0, messages: [user('hi')] }, local)).fields).toEqual([expect.objectContaining({ field: 'max_tokens' })]);
    expect(refusal(() => translateMessagesRequest({ model: 'm', max_tokens: 10, messages: [{ role: 'robot', content: 'x' }] }, local)).fields).toEqual([expect.objectContaining({ field: 'messages[0].role' })]);
  });

  it('count_tokens reads the same conversation without max_tokens', () => {
    const body = captured('tool-result-request');
    const { model, messages, tools } = translateCountTokensRequest({ model: body.model, messages: body.messages, system: body.system, tools: body.tools });
    expect(model).toBe('my-model');
    expect(messages.map((m) => m.role)).toEqual(['system', 'user', 'system', 'assistant', 'tool']);
    expect(tools).toHaveLength(12);
  });
});
