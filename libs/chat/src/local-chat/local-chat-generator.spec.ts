import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import type { JsonSchemaObject } from '@atelier/models';
import type { ChatRequest, ChatTool } from '../chat-types';
import { generateLocalChat } from './local-chat-generator';
import { localChatModel, sample } from './markov-model';
import { seededRandom } from '@atelier/random';

const base: ChatRequest = {
  model: 'local-chat',
  messages: [{ role: 'user', content: 'Tell me about the hare and the tortoise.' }],
  stream: false,
  maxTokens: 256,
  maxTokensExplicit: false,
  temperature: 1,
  topP: 1,
  frequencyPenalty: 0,
  presencePenalty: 0,
  stop: [],
  tools: [],
  toolChoice: 'none',
  parallelToolCalls: true,
  responseFormat: { type: 'text' },
};
const req = (extra: Partial<ChatRequest>): ChatRequest => ({ ...base, ...extra });
const ajv = addFormats(new Ajv2020({ strict: false }));

describe('local-chat generator', () => {
  it('is trained on the bundled corpus and continues from a word of the prompt', () => {
    expect(localChatModel().vocabularySize).toBeGreaterThan(500);
    const out = generateLocalChat(req({ seed: 1, messages: [{ role: 'user', content: 'grapes' }] }));
    expect(out.content).toMatch(/^Grapes\b/);
  });

  it('gives the same text for the same seed and prompt, different text for other seeds', () => {
    const a = generateLocalChat(req({ seed: 123 }));
    expect(generateLocalChat(req({ seed: 123 }))).toEqual(a);
    const others = new Set([1, 2, 3, 4, 5].map((seed) => generateLocalChat(req({ seed })).content));
    expect(others.size).toBeGreaterThan(2);
  });

  it('stops at max_tokens with finish_reason length, counting o200k tokens', () => {
    for (const maxTokens of [1, 5, 17]) {
      const out = generateLocalChat(req({ seed: 9, maxTokens, temperature: 0 }));
      expect(out.finishReason).toBe('length');
      expect(out.completionTokens).toBe(countTokens(out.content!));
      expect(out.completionTokens).toBeLessThanOrEqual(maxTokens);
      expect(out.pieces.join('')).toBe(out.content);
    }
  });

  it('cuts before the earliest stop sequence', () => {
    const free = generateLocalChat(req({ seed: 4, temperature: 0 })).content!;
    const words = free.split(' ');
    const stops = [` ${words[5]}`, ` ${words[3]}`];
    const out = generateLocalChat(req({ seed: 4, temperature: 0, stop: stops }));
    expect(out.finishReason).toBe('stop');
    expect(out.content).toBe(free.slice(0, Math.min(...stops.map((s) => free.indexOf(s)))));
  });

  it('samples greedily at temperature 0 or top_p 0, and more widely at high temperature', () => {
    const successors = { words: ['a', 'b', 'c'], counts: [5, 3, 2] };
    const o = { temperature: 0, topP: 1, frequencyPenalty: 0, presencePenalty: 0 };
    const rng = seededRandom(1);
    const none = new Map<string, number>();
    expect(new Set(Array.from({ length: 50 }, () => sample(successors, rng, o, none)))).toEqual(new Set(['a']));
    expect(new Set(Array.from({ length: 50 }, () => sample(successors, rng, { ...o, temperature: 1, topP: 0 }, none)))).toEqual(new Set(['a']));
    // top_p 0.5 keeps only the most likely word (0.5 of the mass)
    expect(new Set(Array.from({ length: 50 }, () => sample(successors, rng, { ...o, temperature: 1, topP: 0.5 }, none)))).toEqual(new Set(['a']));
    const count = (t: number) => Array.from({ length: 2000 }, () => sample(successors, rng, { ...o, temperature: t }, none)).filter((w) => w === 'c').length;
    expect(count(2)).toBeGreaterThan(count(0.5));
  });

  it('applies frequency and presence penalties to words already generated', () => {
    const successors = { words: ['a', 'b'], counts: [10, 9] };
    const o = { temperature: 0, topP: 1, frequencyPenalty: 0, presencePenalty: 0 };
    const seen = new Map([['a', 2]]);
    expect(sample(successors, seededRandom(1), o, seen)).toBe('a');
    expect(sample(successors, seededRandom(1), { ...o, frequencyPenalty: 0.1 }, seen)).toBe('b');
    expect(sample(successors, seededRandom(1), { ...o, presencePenalty: 0.2 }, seen)).toBe('b');
  });

  it('calls a matching tool with arguments valid against its schema, and answers after the tool result', () => {
    const tool: ChatTool = {
      type: 'function',
      function: {
        name: 'book_flight',
        description: 'Book a flight to a destination',
        parameters: {
          type: 'object',
          $defs: { code: { type: 'string', pattern: '^[A-Z]{3}$' } },
          properties: {
            destination: { type: 'string' },
            from: { $ref: '#/$defs/code' },
            passengers: { type: 'integer', minimum: 1, maximum: 9 },
            class: { enum: ['economy', 'business'] },
            date: { type: 'string', format: 'date' },
            extras: { type: 'array', items: { anyOf: [{ type: 'string', maxLength: 12 }, { type: 'number', multipleOf: 0.5 }] }, minItems: 2 },
          },
          required: ['destination', 'from', 'passengers', 'class', 'date', 'extras'],
          additionalProperties: false,
        },
      },
    };
    const messages: ChatRequest['messages'] = [{ role: 'user', content: 'Please book a flight to Lisbon' }];
    const out = generateLocalChat(req({ seed: 2, messages, tools: [tool], toolChoice: 'auto' }));
    expect(out.finishReason).toBe('tool_calls');
    expect(out.content).toBeNull();
    const args = JSON.parse(out.toolCalls[0].function.arguments);
    expect(ajv.validate(tool.function.parameters!, args)).toBe(true);
    expect(args.destination).toBe('Lisbon');
    expect(out.completionTokens).toBeGreaterThan(0);

    const answered = generateLocalChat(
      req({ seed: 2, tools: [tool], toolChoice: 'auto', messages: [...messages, { role: 'assistant', content: null, tool_calls: out.toolCalls }, { role: 'tool', tool_call_id: out.toolCalls[0].id, content: 'booked' }] }),
    );
    expect(answered.finishReason).toBe('stop');
    expect(answered.content).toMatch(/^The book_flight tool returned booked\. /);
  });

  it('does not call tools on auto when nothing in the prompt matches them, but does when required', () => {
    const tool: ChatTool = { type: 'function', function: { name: 'get_stock_price', description: 'Stock quotes', parameters: { type: 'object', properties: { symbol: { type: 'string' } } } } };
    const messages: ChatRequest['messages'] = [{ role: 'user', content: 'Tell me a fable' }];
    expect(generateLocalChat(req({ seed: 1, messages, tools: [tool], toolChoice: 'auto' })).toolCalls).toEqual([]);
    expect(generateLocalChat(req({ seed: 1, messages, tools: [tool], toolChoice: 'required' })).toolCalls).toHaveLength(1);
  });

  it('calls every matching tool in parallel unless parallel_tool_calls is false', () => {
    const tool = (name: string, description: string): ChatTool => ({ type: 'function', function: { name, description, parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } });
    const tools = [tool('get_weather', 'Current weather of a city'), tool('get_time', 'Local time of a city'), tool('get_stock', 'Stock quote')];
    const messages: ChatRequest['messages'] = [{ role: 'user', content: 'What is the weather and the local time in Rome?' }];
    const parallel = generateLocalChat(req({ seed: 3, messages, tools, toolChoice: 'auto' }));
    expect(parallel.toolCalls.map((c) => c.function.name).sort()).toEqual(['get_time', 'get_weather']);
    expect(parallel.toolCalls.map((c) => c.index)).toEqual([0, 1]);
    expect(new Set(parallel.toolCalls.map((c) => c.id)).size).toBe(2);
    const single = generateLocalChat(req({ seed: 3, messages, tools, toolChoice: 'auto', parallelToolCalls: false }));
    expect(single.toolCalls).toHaveLength(1);
  });

  it('answers json_object with an object and json_schema with a valid value', () => {
    expect(typeof JSON.parse(generateLocalChat(req({ seed: 1, responseFormat: { type: 'json_object' } })).content!)).toBe('object');
    const schemas = [
      { type: 'array', items: { type: 'object', properties: { id: { type: 'string', format: 'uuid' }, score: { type: 'number', minimum: 0, maximum: 1 } }, required: ['id', 'score'] }, minItems: 3, maxItems: 3 },
      { oneOf: [{ type: 'object', properties: { kind: { const: 'a' } }, required: ['kind'] }, { type: 'string', minLength: 50 }] },
      { type: 'object', properties: { when: { type: 'string', format: 'date-time' }, email: { type: 'string', format: 'email' } }, required: ['when', 'email'], minProperties: 3 },
      { type: 'integer', exclusiveMinimum: 10, exclusiveMaximum: 12 },
    ] as JsonSchemaObject[];
    for (const schema of schemas)
      for (const seed of [1, 2, 3]) {
        const out = generateLocalChat(req({ seed, responseFormat: { type: 'json_schema', json_schema: { name: 's', schema } } }));
        expect(ajv.validate(schema, JSON.parse(out.content!))).toBe(true);
      }
  });

  it('mentions the media it received', () => {
    const out = generateLocalChat(req({ seed: 1 }), [
      { kind: 'image', contentType: 'image/png', bytes: 2048, width: 64, height: 32 },
      { kind: 'video', contentType: 'video/mp4', bytes: 3 * 1024 * 1024 },
    ]);
    expect(out.content).toMatch(/^I received an image \(image\/png, 64x32, 2\.0 KB\) and a video \(video\/mp4, 3\.0 MB\)\. /);
  });
});
