import { waitFor } from '@atelier/testing';
import { MessageEventStream, messageFromCompletion, type MessageStreamEvent } from './message-output';
import type { ChatCompletion } from '../chat-types';

const chunk = (delta: Record<string, unknown>, finish: string | null = null, usage?: unknown) =>
  JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }], ...(usage ? { usage } : {}) });

describe('the Messages stream from chat chunks', () => {
  it("keeps Anthropic's order: text and each tool call in blocks of their own, increasing indexes, usage at both ends", () => {
    const events: MessageStreamEvent[] = [];
    const stream = new MessageEventStream('msg_1', 'claude-sonnet-4-6', (e) => events.push(e));
    stream.start(40);
    stream.chunk(chunk({ role: 'assistant', content: '' }));
    stream.chunk(chunk({ content: 'I will ' }));
    stream.chunk(chunk({ content: 'write it.' }));
    stream.chunk(chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'Write', arguments: '' } }] }));
    stream.chunk(chunk({ tool_calls: [{ index: 0, function: { arguments: '{"file_path":' } }] }));
    stream.chunk(chunk({ tool_calls: [{ index: 0, function: { arguments: '"/x"}' } }] }));
    stream.chunk(chunk({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'Read', arguments: '{}' } }] }));
    stream.chunk(chunk({}, 'tool_calls'));
    stream.chunk(chunk({}, null, { prompt_tokens: 40, completion_tokens: 12, total_tokens: 52, prompt_tokens_details: { cached_tokens: 30 } }));
    stream.end(40);
    expect(events.map((e) => `${e.type}${e.index === undefined ? '' : `:${String(e.index)}`}`)).toEqual([
      'message_start',
      'ping',
      'content_block_start:0',
      'content_block_delta:0',
      'content_block_delta:0',
      'content_block_stop:0',
      'content_block_start:1',
      'content_block_delta:1',
      'content_block_delta:1',
      'content_block_stop:1',
      'content_block_start:2',
      'content_block_delta:2',
      'content_block_stop:2',
      'message_delta',
      'message_stop',
    ]);
    expect(events[0]).toMatchObject({ message: { id: 'msg_1', model: 'claude-sonnet-4-6', content: [], usage: { input_tokens: 40, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 } } });
    expect(events[6]).toEqual({ type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'call_a', name: 'Write', input: {} } });
    expect(events[7]).toEqual({ type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"file_path":' } });
    expect(events.at(-2)).toEqual({
      type: 'message_delta',
      delta: { stop_reason: 'tool_use', stop_sequence: null },
      usage: { input_tokens: 10, output_tokens: 12, cache_creation_input_tokens: 0, cache_read_input_tokens: 30 },
    });
  });

  it('ends a broken stream with an error event, never message_stop, and pings while the upstream is silent', async () => {
    const events: MessageStreamEvent[] = [];
    const stream = new MessageEventStream('msg_2', 'm', (e) => events.push(e));
    stream.start(5, 60);
    stream.chunk(chunk({ content: 'partial' }));
    await waitFor(() => events.filter((e) => e.type === 'ping').length >= 2, { description: 'a ping after 60 ms of silence' });
    stream.fail('api_error', 'The model provider failed');
    const after = events.length;
    stream.end(5);
    expect(events.at(-1)).toEqual({ type: 'error', error: { type: 'api_error', message: 'The model provider failed' } });
    expect(events.length).toBe(after);
    expect(events.some((e) => e.type === 'message_stop')).toBe(false);
  });

  it('maps a whole completion to a Message with every usage field a number', () => {
    const completion = {
      id: 'c',
      object: 'chat.completion',
      created: 1,
      model: 'up',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hi', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: 'not json' } }] }, finish_reason: 'length' }],
      usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
    } as ChatCompletion;
    expect(messageFromCompletion(completion, 'msg_3', 'alias')).toEqual({
      id: 'msg_3',
      type: 'message',
      role: 'assistant',
      model: 'alias',
      content: [{ type: 'text', text: 'Hi' }, { type: 'tool_use', id: 'call_1', name: 'f', input: { input: 'not json' } }],
      stop_reason: 'max_tokens',
      stop_sequence: null,
      usage: { input_tokens: 3, output_tokens: 2, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
    });
  });
});
