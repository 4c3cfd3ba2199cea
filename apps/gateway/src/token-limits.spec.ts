import { createTenant, waitFor, type Tenant } from '@atelier/testing';
import { startChatStack, type ChatStack } from './chat.harness';

/** Chat tokens per minute: counted at the request's upper bound, corrected to what it used when it settles. */
describe('rate limits (tpm, chat)', () => {
  let stack: ChatStack;

  beforeAll(async () => {
    stack = await startChatStack();
  });
  afterAll(() => stack?.close());

  const chat = (key: string, maxTokens: number) =>
    fetch(`${stack.base}/api/ai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'remote-echo', messages: [{ role: 'user', content: 'hello upstream' }], max_tokens: maxTokens }),
    });
  const keyWith = async (t: Tenant, limits: Record<string, number>) =>
    (await stack.gw.http.request<{ api_key: string; prefix: string }>('POST', '/api/api_keys', { token: t.apiKey, body: { name: 'tokens', limits } })).body;

  it('counts a request for prompt plus max_tokens, then only for the 30 tokens it used', async () => {
    const t = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const key = await keyWith(t, { tpm: 100 });
    // remote-echo always reports 21 prompt + 9 completion tokens; the estimate is prompt + 50.
    const started = performance.now();
    const first = await chat(key.api_key, 50);
    expect(first.status).toBe(200);
    expect(first.headers.get('x-ratelimit-limit-tokens')).toBe('100');
    const estimate = 100 - Number(first.headers.get('x-ratelimit-remaining-tokens'));
    expect(estimate).toBeGreaterThan(50);
    expect(2 * estimate).toBeGreaterThan(100); // a second estimate fits only once the first is corrected to 30
    await first.text();
    // Settled: the first now counts 30, so a second fits (retried while the correction lands).
    const second = await waitFor(async () => ((r) => (r.status === 200 ? r : undefined))(await chat(key.api_key, 50)), { timeoutMs: 5000, description: 'the correction' });
    // Exactly the first's 30 used tokens and this one's estimate, give or take the tokens the
    // minute window has given back since the first (100 per minute: one per 600 ms).
    const regained = Math.floor(((performance.now() - started) * 100) / 60_000);
    const remaining = Number(second.headers.get('x-ratelimit-remaining-tokens'));
    expect(remaining).toBeGreaterThanOrEqual(100 - 30 - estimate);
    expect(remaining).toBeLessThanOrEqual(100 - 30 - estimate + regained);
    await second.text();
    // 30 + 30 used: the next estimate no longer fits.
    await waitFor(async () => ((r) => (r.status === 429 ? r : undefined))(await chat(key.api_key, 50)), { timeoutMs: 5000, description: 'the third to be refused' }).then(async (third) => {
      expect(Number(third.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(third.headers.get('x-ratelimit-remaining-tokens')).toBe('0');
      expect(await third.json()).toMatchObject({ error: { type: 'rate_limited', message: expect.stringMatching(`^Rate limit reached: 100 tokens per minute for API key ${key.prefix}`) } });
    });
  });

  it('refuses a request that could never fit, saying to lower max_tokens', async () => {
    const t = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const key = await keyWith(t, { tpm: 40 });
    const res = await chat(key.api_key, 50);
    expect(res.status).toBe(429);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/more than the 40 tokens per minute of API key .*; lower max_tokens$/);
  });

  it('with max_concurrent too: a token refusal leaves no slot held, and a concurrency refusal gives its tokens back', async () => {
    const t = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    // The two limits are checked together (one Redis round trip), so each refusal must undo the other's count.
    const key = await keyWith(t, { tpm: 100, max_concurrent: 1 });
    const first = await chat(key.api_key, 50);
    expect(first.status).toBe(200);
    await first.text();
    const second = await waitFor(async () => ((r) => (r.status === 200 ? r : undefined))(await chat(key.api_key, 50)), { timeoutMs: 5000, description: 'the first correction' });
    await second.text();
    const refused = await waitFor(
      async () => ((r) => (r.status === 429 && r.headers.get('x-ratelimit-remaining-tokens') === '0' ? r : undefined))(await chat(key.api_key, 50)),
      { timeoutMs: 5000, description: 'a refusal for tokens' },
    );
    expect(await refused.json()).toMatchObject({ error: { message: expect.stringMatching(/^Rate limit reached: 100 tokens per minute/) } });
    // 30 + 30 used: a small request fits, and finds the only slot free.
    const small = await chat(key.api_key, 10);
    expect(small.status).toBe(200);
    await small.text();

    const other = await keyWith(t, { tpm: 1000, max_concurrent: 1 });
    const stream = (maxTokens: number, signal?: AbortSignal) =>
      fetch(`${stack.base}/api/ai/chat/completions`, {
        method: 'POST',
        signal,
        headers: { authorization: `Bearer ${other.api_key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'remote-slow', messages: [{ role: 'user', content: 'hello upstream' }], max_tokens: maxTokens, stream: true }),
      });
    const held = new AbortController();
    expect((await stream(300, held.signal)).status).toBe(200);
    // Fits the tokens (about 320 + 620 of 1,000) but not the slot.
    const busy = await stream(600);
    expect(busy.status).toBe(429);
    expect(await busy.json()).toMatchObject({ error: { message: expect.stringMatching(/^Concurrency limit reached/) } });
    held.abort();
    // Had the refused request kept its 620 tokens, 620 more would not fit for a minute.
    const done = new AbortController();
    await waitFor(async () => (await stream(600, done.signal)).status === 200, { timeoutMs: 5000, description: 'the slot and tokens back' });
    done.abort();
  }, 20_000);

  it("applies the namespace's limit to every key billing there, and leaves unlimited keys without the headers", async () => {
    const t = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const plain = await chat(t.apiKey, 50);
    expect(plain.status).toBe(200);
    expect(plain.headers.get('x-ratelimit-limit-tokens')).toBeNull();
    await plain.text();
    await stack.gw.http.request('PUT', `/api/admin/namespaces/${t.namespace}/limits`, { token: stack.gw.adminToken, body: { tpm: 500 } });
    const limited = await waitFor(async () => ((r) => (r.headers.get('x-ratelimit-limit-tokens') ? r : undefined))(await chat(t.apiKey, 50)), { description: 'the limit to reach the cached key' });
    expect(limited.headers.get('x-ratelimit-limit-tokens')).toBe('500');
    const over = await stack.gw.http.request('POST', '/api/api_keys', { token: t.apiKey, body: { name: 'x', limits: { tpm: 600 } } });
    expect(over.body).toMatchObject({ error: { message: "limits.tpm must not exceed the namespace's own limit of 500" } });
  });
});
