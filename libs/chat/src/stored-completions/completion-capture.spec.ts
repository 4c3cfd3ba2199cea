import type { Caller } from '@atelier/auth';
import { assembleStreamedCompletion, storeDecision, storedRequest } from './completion-capture';

const caller = (extra: Partial<Caller> = {}): Caller => ({ userId: 'u', username: 'u', namespaceId: 'home', namespace: 'home', keyPrefix: 'k', ...extra });
const usage = { prompt_tokens: 5, completion_tokens: 4, total_tokens: 9 };

describe('storeDecision', () => {
  it('keeps store: true with its metadata, and nothing by default', () => {
    expect(storeDecision(caller(), 'home', { store: true, metadata: { a: 'b' } })).toEqual({ metadata: { a: 'b' } });
    expect(storeDecision(caller(), 'home', { store: true })).toEqual({ metadata: {} });
    expect(storeDecision(caller(), 'home', {})).toBeUndefined();
    expect(storeDecision(caller(), 'home', { metadata: { a: 'b' } })).toBeUndefined();
  });

  it('samples by the capture rate, only for the home namespace, and store: false or a refusing key always wins', () => {
    const half = caller({ captureRate: 0.5 });
    expect(storeDecision(half, 'home', {}, { random: () => 0.49 })).toEqual({ metadata: {} });
    expect(storeDecision(half, 'home', {}, { random: () => 0.5 })).toBeUndefined();
    expect(storeDecision(half, 'elsewhere', {}, { random: () => 0 })).toBeUndefined();
    expect(storeDecision(half, 'home', { store: false }, { random: () => 0 })).toBeUndefined();
    expect(storeDecision(caller({ captureRate: 1, storeRefused: true }), 'home', {}, { random: () => 0 })).toBeUndefined();
    expect(storeDecision(caller({ storeRefused: true }), 'home', { store: true })).toBeUndefined();
  });

  it('keeps by default for an experiment with a metric, unless store: false or the key refuses', () => {
    expect(storeDecision(caller(), 'home', {}, { storeByDefault: true })).toEqual({ metadata: {} });
    expect(storeDecision(caller(), 'elsewhere', { metadata: { a: 'b' } }, { storeByDefault: true })).toEqual({ metadata: { a: 'b' } });
    expect(storeDecision(caller(), 'home', { store: false }, { storeByDefault: true })).toBeUndefined();
    expect(storeDecision(caller({ storeRefused: true }), 'home', {}, { storeByDefault: true })).toBeUndefined();
  });

  it('refuses malformed fields even when nothing would be stored', () => {
    expect(() => storeDecision(caller(), 'home', { store: 1 })).toThrow('store must be a boolean');
    expect(() => storeDecision(caller({ storeRefused: true }), 'home', { metadata: { k: 1 } })).toThrow('metadata values must be strings');
  });
});

describe('assembleStreamedCompletion', () => {
  it('joins content and tool calls in order, with the last finish_reason and the charged usage', () => {
    const chunks = [
      { id: 'chatcmpl-abc', object: 'chat.completion.chunk', created: 1700000000, model: 'up-model', choices: [{ index: 0, delta: { role: 'assistant', content: '' } }] },
      { id: 'chatcmpl-abc', choices: [{ index: 0, delta: { content: 'Hel' } }] },
      { id: 'chatcmpl-abc', choices: [{ index: 0, delta: { content: 'lo' } }] },
      { id: 'chatcmpl-abc', choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'get', arguments: '{"a"' } }] } }] },
      { id: 'chatcmpl-abc', choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: ':1}' } }] } }] },
      { id: 'chatcmpl-abc', choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
    ].map((c) => JSON.stringify(c));
    const completion = assembleStreamedCompletion([...chunks, 'not json'], usage, { id: 'chatcmpl-fallback', model: 'm' });
    expect(completion).toEqual({
      id: 'chatcmpl-abc',
      object: 'chat.completion',
      created: 1700000000,
      model: 'up-model',
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: 'Hello', refusal: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get', arguments: '{"a":1}' } }] },
          logprobs: null,
          finish_reason: 'tool_calls',
        },
      ],
      usage,
    });
  });

  it('falls back to the request id and model when no chunk names them', () => {
    expect(assembleStreamedCompletion([], usage, { id: 'chatcmpl-x', model: 'm' })).toMatchObject({ id: 'chatcmpl-x', model: 'm', choices: [{ message: { content: null } }] });
  });
});

describe('storedRequest', () => {
  it('keeps the OpenAI parameters but the messages, the model, streaming and atelier fields', () => {
    expect(storedRequest({ model: 'm', messages: [], temperature: 0.1, tools: [], stream: true, stream_options: {}, store: true, metadata: {}, target_namespace: 'x', pad: 1 })).toEqual({
      temperature: 0.1,
      tools: [],
    });
  });
});
