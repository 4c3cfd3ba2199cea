import type { ChatCompletion } from '../chat-types';
import { completionOutput } from './response-output';
import { translateResponsesRequest } from './responses-request';

const completionCalling = (name: string, args: string): ChatCompletion => ({
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 0,
  model: 'm',
  choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name, arguments: args } }] }, finish_reason: 'tool_calls' }],
  usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
});

describe('translateResponsesRequest', () => {
  it('merges instructions, developer and system messages into one leading system message, in order', () => {
    const { chatBody } = translateResponsesRequest(
      {
        model: 'm',
        instructions: 'First.',
        input: [
          { role: 'developer', content: [{ type: 'input_text', text: 'Second.' }] },
          { role: 'user', content: 'hi' },
          { type: 'message', role: 'system', content: 'Third.' },
        ],
      },
      [],
    );
    expect(chatBody.messages).toEqual([
      { role: 'system', content: 'First.\n\nSecond.\n\nThird.' },
      { role: 'user', content: 'hi' },
    ]);
  });

  it('flattens namespace tools and turns their calls back into function_call items carrying the namespace', () => {
    const translated = translateResponsesRequest(
      { model: 'm', input: 'x', tools: [{ type: 'namespace', name: 'agents', tools: [{ type: 'function', name: 'spawn', parameters: { type: 'object', properties: {} } }] }] },
      [],
    );
    expect((translated.chatBody.tools as { function: { name: string } }[]).map((t) => t.function.name)).toEqual(['agents__spawn']);
    const { output } = completionOutput(completionCalling('agents__spawn', '{"a":1}'), translated.tools);
    expect(output).toEqual([expect.objectContaining({ type: 'function_call', name: 'spawn', namespace: 'agents', call_id: 'call_1', arguments: '{"a":1}' })]);
  });

  it('carries a custom tool as a one-string function, and its call back as custom_tool_call with the input', () => {
    const translated = translateResponsesRequest({ model: 'm', input: 'x', tools: [{ type: 'custom', name: 'apply_patch', description: 'Patch files' }] }, []);
    expect(translated.chatBody.tools).toEqual([
      { type: 'function', function: { name: 'apply_patch', description: 'Patch files', parameters: expect.objectContaining({ required: ['input'] }) } },
    ]);
    const { output } = completionOutput(completionCalling('apply_patch', '{"input":"*** Begin Patch"}'), translated.tools);
    expect(output).toEqual([expect.objectContaining({ type: 'custom_tool_call', id: expect.stringMatching(/^ctc_/), call_id: 'call_1', name: 'apply_patch', input: '*** Begin Patch' })]);
    // And the next turn sends that call and its output back as a tool call and a tool message.
    const next = translateResponsesRequest(
      {
        model: 'm',
        tools: [{ type: 'custom', name: 'apply_patch' }],
        input: [
          { type: 'custom_tool_call', call_id: 'call_1', name: 'apply_patch', input: '*** Begin Patch' },
          { type: 'custom_tool_call_output', call_id: 'call_1', output: 'done' },
        ],
      },
      [],
    );
    expect(next.chatBody.messages).toEqual([
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'apply_patch', arguments: '{"input":"*** Begin Patch"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'done' },
    ]);
  });

  it('leaves hosted tools and reasoning items out, naming the tools it dropped', () => {
    const translated = translateResponsesRequest(
      {
        model: 'm',
        tools: [{ type: 'web_search' }, { type: 'file_search', vector_store_ids: ['vs'] }, { type: 'function', name: 'f' }],
        input: [{ type: 'reasoning', id: 'rs_1', summary: [] }, { role: 'user', content: 'hi' }],
      },
      [],
    );
    expect(translated.droppedTools).toEqual(['web_search', 'file_search']);
    expect((translated.chatBody.tools as unknown[]).length).toBe(1);
    expect(translated.chatBody.messages).toEqual([{ role: 'user', content: 'hi' }]);
  });
});
