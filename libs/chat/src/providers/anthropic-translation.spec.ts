import { chatRequestFrom } from '../chat-request';
import { ChunksFromMessages, completionOf, messagesRequestOf } from './anthropic-translation';

const request = (body: Record<string, unknown>) => chatRequestFrom('m', body, { promptTokens: 10, maxTokens: 64, maxTokensExplicit: true });

describe('chat completions to an anthropic engine and back', () => {
  it('puts leading system messages in system, keeps later ones in place, merges tool results into one user turn, and maps the settings', () => {
    const body = messagesRequestOf(
      request({
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'developer', content: 'Use metric units.' },
          { role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] },
          { role: 'assistant', content: 'Checking.', tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: '{"x":1}' } }, { id: 'b', type: 'function', function: { name: 'g', arguments: 'oops' } }] },
          { role: 'tool', tool_call_id: 'a', content: '1' },
          { role: 'tool', tool_call_id: 'b', content: '2' },
          { role: 'system', content: 'Now answer.' },
        ],
        tools: [{ type: 'function', function: { name: 'f', description: 'F', parameters: { type: 'object', properties: {} } } }, { type: 'function', function: { name: 'g' } }],
        tool_choice: 'required',
        parallel_tool_calls: false,
        temperature: 1.5,
        stop: ['END'],
      }),
      'claude-x',
      true,
    );
    expect(body).toEqual({
      model: 'claude-x',
      max_tokens: 64,
      system: 'Be brief.\n\nUse metric units.',
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }] },
        { role: 'assistant', content: [{ type: 'text', text: 'Checking.' }, { type: 'tool_use', id: 'a', name: 'f', input: { x: 1 } }, { type: 'tool_use', id: 'b', name: 'g', input: { input: 'oops' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a', content: '1' }, { type: 'tool_result', tool_use_id: 'b', content: '2' }] },
        { role: 'system', content: [{ type: 'text', text: 'Now answer.' }] },
      ],
      tools: [{ name: 'f', description: 'F', input_schema: { type: 'object', properties: {} } }, { name: 'g', input_schema: { type: 'object', properties: {} } }],
      tool_choice: { type: 'any', disable_parallel_tool_use: true },
      temperature: 1,
      stop_sequences: ['END'],
      stream: true,
    });
  });

  it('reads a Message and a Messages stream as chat, usage with its cache reads as cached prompt tokens', () => {
    const usage = { input_tokens: 5, output_tokens: 3, cache_creation_input_tokens: 2, cache_read_input_tokens: 7 };
    expect(completionOf({ content: [{ type: 'thinking', thinking: 'hm' }, { type: 'text', text: 'Hi' }], stop_reason: 'max_tokens', usage }, 'c1', 'm', 1)).toMatchObject({
      choices: [{ message: { content: 'Hi', reasoning_content: 'hm' }, finish_reason: 'length' }],
      usage: { prompt_tokens: 14, completion_tokens: 3, total_tokens: 17, prompt_tokens_details: { cached_tokens: 7 } },
    });
    const converter = new ChunksFromMessages('c2', 'm', 1);
    const events = [
      { type: 'message_start', message: { usage: { ...usage, output_tokens: 1 } } },
      { type: 'ping' },
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hel' } },
      { type: 'content_block_stop', index: 0 },
      { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 't', name: 'f', input: {} } },
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"a":' } },
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '1}' } },
      { type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 3 } },
      { type: 'message_stop' },
    ];
    const deltas = events.flatMap((e) => converter.event(e)).map((c) => [c.choices[0].delta, c.choices[0].finish_reason]);
    expect(deltas).toEqual([
      [{ role: 'assistant', content: '' }, null],
      [{ content: 'Hel' }, null],
      [{ tool_calls: [{ index: 0, id: 't', type: 'function', function: { name: 'f', arguments: '' } }] }, null],
      [{ tool_calls: [{ index: 0, function: { arguments: '{"a":' } }] }, null],
      [{ tool_calls: [{ index: 0, function: { arguments: '1}' } }] }, null],
      [{}, 'tool_calls'],
    ]);
    expect(converter.ended).toBe(true);
    expect(converter.reportedUsage).toMatchObject({ prompt_tokens: 14, completion_tokens: 3 });
    expect(() => new ChunksFromMessages('c3', 'm', 1).event({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })).toThrow('Overloaded');
  });
});
