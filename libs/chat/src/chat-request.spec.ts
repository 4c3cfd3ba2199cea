import { ApiError } from '@atelier/contracts';
import { ModelCatalog, type ChatModelDefinition } from '@atelier/models';
import { Prisma } from '@atelier/db';
import { tokenCost } from './chat-pricing';
import { parseChatRequest, providerBody, resolveChatModel } from './chat-request';

const catalog = ModelCatalog.fromDirectory();
const chat = catalog.get('local-chat') as ChatModelDefinition;
const user = (content: string) => ({ role: 'user', content });

function failure(fn: () => unknown): { status: number; message: string } {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    return { status: (err as ApiError).status, message: (err as ApiError).message };
  }
  throw new Error('expected an error');
}

describe('resolveChatModel', () => {
  it('uses the spec texts', () => {
    expect(failure(() => resolveChatModel(catalog, {}))).toEqual({ status: 400, message: 'You must specify a model to call' });
    expect(failure(() => resolveChatModel(catalog, { model: 'x' }))).toEqual({ status: 404, message: 'Model not found: x' });
    expect(failure(() => resolveChatModel(catalog, { model: 'local-image-edit' }))).toEqual({
      status: 400,
      message: 'Model local-image-edit is not a chat model; use POST /api/ai/images/edit for it',
    });
    expect(failure(() => resolveChatModel(catalog, []))).toEqual({ status: 400, message: 'Request body must be a JSON object' });
  });
});

describe('parseChatRequest', () => {
  it('in place (the gateway hands over the body it parsed) reads the request exactly as from a copy, and fills the same defaults', () => {
    for (const extra of [{}, { max_tokens: 50 }, { max_completion_tokens: 20 }, { max_tokens: 50, stream: true }]) {
      const body = () => ({ model: 'local-chat', messages: [user('hi')], ...extra });
      const original = body();
      const copied = parseChatRequest(chat, original);
      expect(original).toEqual(body());
      const handed = body();
      const inPlace = parseChatRequest(chat, handed, { inPlace: true });
      expect(inPlace.body).toBe(handed);
      expect(inPlace.request).toEqual(copied.request);
      expect(inPlace.body).toEqual(copied.body);
    }
  });

  it('resolves the completion limit: max_completion_tokens, then max_tokens, then the model default within the context window', () => {
    const both = parseChatRequest(chat, { model: 'local-chat', messages: [user('hi')], max_tokens: 50, max_completion_tokens: 20 });
    expect(both.request).toMatchObject({ maxTokens: 20, maxTokensExplicit: true });
    expect(parseChatRequest(chat, { model: 'local-chat', messages: [user('hi')], max_tokens: 50 }).request.maxTokens).toBe(50);
    const dflt = parseChatRequest(chat, { model: 'local-chat', messages: [user('hi')] });
    expect(dflt.request).toMatchObject({ maxTokens: chat.default_max_tokens, maxTokensExplicit: false });
    // A long prompt leaves less room than the default: the default shrinks to fit.
    const long = parseChatRequest(chat, { model: 'local-chat', messages: [user('word '.repeat(7500))] });
    expect(long.request.maxTokens).toBe(chat.context_window - long.promptTokens);
    expect(failure(() => parseChatRequest(chat, { model: 'local-chat', messages: [user('word '.repeat(9000))] })).message).toMatch(
      /^The messages use more than the context window of model local-chat \(8192 tokens\)$/,
    );
    // Exactly the context window: counted to the end, and no room left for any completion.
    const overhead = parseChatRequest(chat, { model: 'local-chat', messages: [user('word')] }).promptTokens - 1;
    const full = { model: 'local-chat', messages: [user(`word${' word'.repeat(chat.context_window - overhead - 1)}`)] };
    expect(failure(() => parseChatRequest(chat, full)).message).toBe(
      'The messages use all 8192 tokens of the context window of model local-chat, leaving none for the completion',
    );
  });

  it('fills defaults and normalises options', () => {
    const { request, promptTokens } = parseChatRequest(chat, { model: 'local-chat', messages: [user('hi')], stop: 'END', seed: 5 });
    expect(request).toMatchObject({ stream: false, temperature: 0.7, topP: 1, stop: ['END'], seed: 5, toolChoice: 'none', parallelToolCalls: true, responseFormat: { type: 'text' } });
    expect(promptTokens).toBeGreaterThan(3);
  });

  it('accepts a tool round trip and refuses tool messages that answer nothing', () => {
    const call = { id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } };
    const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }];
    const messages = [user('x'), { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: 'call_1', content: 'ok' }];
    expect(parseChatRequest(chat, { model: 'local-chat', messages, tools }).request.toolChoice).toBe('auto');
    expect(failure(() => parseChatRequest(chat, { model: 'local-chat', messages: [...messages, { role: 'tool', tool_call_id: 'call_1', content: 'again' }], tools })).message).toBe(
      "messages[3].tool_call_id 'call_1' is answered twice",
    );
    expect(failure(() => parseChatRequest(chat, { model: 'local-chat', messages: [user('x'), { role: 'tool', tool_call_id: 'call_1', content: 'ok' }] })).message).toBe(
      "messages[1].tool_call_id 'call_1' does not answer a tool call of the preceding assistant message",
    );
    expect(failure(() => parseChatRequest(chat, { model: 'local-chat', messages: [user('x')], tools: [...tools, ...tools] })).message).toBe(
      "tools[1].function.name 'f' is declared twice",
    );
  });

  it('never forwards atelier-only fields to a provider', () => {
    expect(providerBody({ model: 'm', target_namespace: 'acme', user: 'u' })).toEqual({ model: 'm', user: 'u' });
    // Unknown fields are accepted from clients but never forwarded.
    expect(providerBody({ model: 'm', messages: [], pad: 'x'.repeat(1000), seed: 1 })).toEqual({ model: 'm', messages: [], seed: 1 });
    // store and metadata are atelier's stored completions: a provider must not keep the request too.
    expect(providerBody({ model: 'm', messages: [], store: true, metadata: { team: 'a' } })).toEqual({ model: 'm', messages: [] });
  });
});

describe('tokenCost', () => {
  it('prices tokens exactly and rounds fractions of a micro-credit up', () => {
    const pricing = { method: 'token' as const, input_cost_per_token: '0.000001', output_cost_per_token: '0.000002' };
    expect(tokenCost(pricing, 1000, 500)).toBe('0.002');
    expect(tokenCost({ ...pricing, input_cost_per_token: '0.0000001' }, 15, 0)).toBe('0.000002');
    expect(tokenCost(pricing, 0, 0)).toBe('0');
  });

  it('gives what decimal arithmetic gives, for any prices and counts', () => {
    // The integer path against the rule written with decimals: price x tokens, summed, rounded up to 6 places.
    const byDecimals = (input: string, output: string, p: number, c: number) =>
      new Prisma.Decimal(input).times(p).plus(new Prisma.Decimal(output).times(c)).toDecimalPlaces(6, Prisma.Decimal.ROUND_UP).toFixed();
    let seed = 7;
    const next = (n: number) => (seed = (seed * 48271) % 2147483647) % n;
    const price = () => {
      const digits = next(12);
      const whole = next(4) === 0 ? String(next(30)) : '0';
      return digits === 0 ? whole : `${whole}.${String(next(10 ** Math.min(digits, 9))).padStart(digits, '0')}`;
    };
    for (let i = 0; i < 2000; i++) {
      const [input, output] = [price(), price()];
      const [p, c] = [next(4) === 0 ? next(2_000_000_000) : next(5000), next(3) === 0 ? 0 : next(100_000)];
      expect(tokenCost({ method: 'token', input_cost_per_token: input, output_cost_per_token: output }, p, c)).toBe(byDecimals(input, output, p, c));
    }
    // Counts a provider got wrong still price by the same rule.
    const pricing = { method: 'token' as const, input_cost_per_token: '0.0000015', output_cost_per_token: '0.000002' };
    expect(tokenCost(pricing, 10.5, 3)).toBe(byDecimals('0.0000015', '0.000002', 10.5, 3));
    expect(tokenCost(pricing, -4, 3)).toBe(byDecimals('0.0000015', '0.000002', -4, 3));
  });
});
