import OpenAI from 'openai';
import { createPrismaClient, type PrismaClient } from '@atelier/db';
import { chatUsageRows, createTenant, fakeEmbedding, waitFor, type Tenant } from '@atelier/testing';
import { startChatStack, type ChatStack } from './chat.harness';

const cosine = (a: number[], b: number[]) => {
  let dot = 0;
  let na = 0;
  let nb = 0;
  a.forEach((x, i) => {
    dot += x * b[i];
    na += x * x;
    nb += b[i] * b[i];
  });
  return dot / Math.sqrt(na * nb);
};

describe('embeddings through the gateway (POST /api/ai/embeddings)', () => {
  let stack: ChatStack;
  let user: Tenant;
  let client: OpenAI;
  let prisma: PrismaClient;
  const balance = async (t: Tenant) => (await stack.gw.http.request<{ credits: string; reserved: string }>('GET', '/api/credits', { token: t.apiKey })).body;

  beforeAll(async () => {
    stack = await startChatStack();
    user = await createTenant(stack.gw.http, stack.gw.adminToken, '100');
    client = stack.client(user.apiKey);
    prisma = createPrismaClient(stack.gw.env.databaseUrl, 2);
  });
  afterAll(async () => {
    await prisma?.$disconnect();
    await stack?.close();
  });

  it("decodes the SDK's default base64 to the same vectors as float, from local-embed; similar texts score closer", async () => {
    const input = ['the cat sat on the mat', 'a cat sat on a mat', 'quarterly revenue grew in europe'];
    // The SDK asks for base64 by default and decodes it; encoding_format: 'float' gets JSON numbers.
    const viaBase64 = await client.embeddings.create({ model: 'local-embed', input });
    const viaFloat = await client.embeddings.create({ model: 'local-embed', input, encoding_format: 'float' });
    expect(viaBase64).toMatchObject({ object: 'list', model: 'local-embed', usage: { prompt_tokens: expect.any(Number), total_tokens: expect.any(Number) } });
    expect(viaBase64.data.map((d) => [d.object, d.index, d.embedding.length])).toEqual([
      ['embedding', 0, 256],
      ['embedding', 1, 256],
      ['embedding', 2, 256],
    ]);
    expect(viaBase64.data.map((d) => d.embedding)).toEqual(viaFloat.data.map((d) => d.embedding));
    const [a, b, c] = viaFloat.data.map((d) => d.embedding);
    expect(Math.hypot(...a)).toBeCloseTo(1, 5);
    expect(cosine(a, b)).toBeGreaterThan(cosine(a, c) + 0.3);
    // Deterministic: the same text, the same vector.
    const again = await client.embeddings.create({ model: 'local-embed', input: input[0], encoding_format: 'float' });
    expect(again.data[0].embedding).toEqual(a);
    const short = await client.embeddings.create({ model: 'local-embed', input: input[0], dimensions: 64, encoding_format: 'float' });
    expect(short.data[0].embedding).toHaveLength(64);
    expect(Math.hypot(...short.data[0].embedding)).toBeCloseTo(1, 5);
  });

  it('splits a big request into the upstream batches and puts the vectors back in input order, billing the upstream tokens', async () => {
    const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const input = Array.from({ length: 250 }, (_, i) => `document number ${i}`);
    const before = stack.upstream.requests.filter((r) => r.model === 'embed').length;
    const res = await stack.client(payer.apiKey).embeddings.create({ model: 'remote-embed', input, encoding_format: 'float' });
    const batches = stack.upstream.requests.filter((r) => r.model === 'embed').slice(before);
    expect(batches.map((r) => (r.body.input as string[]).length).sort((x, y) => x - y)).toEqual([50, 100, 100]);
    expect(res.data.map((d) => d.index)).toEqual(input.map((_, i) => i));
    res.data.forEach((d, i) => d.embedding.forEach((x, j) => expect(x).toBeCloseTo(fakeEmbedding(input[i])[j], 6)));
    expect(res.usage).toEqual({ prompt_tokens: 750, total_tokens: 750 });
    await waitFor(async () => (await balance(payer)).reserved === '0', { description: 'the charge to be settled' });
    expect((await balance(payer)).credits).toBe(String(Number((1 - 750 * 0.00001).toFixed(6))));
    const usage = await stack.gw.http.request<{ rows: { group: string; requests: number; input_tokens: number }[] }>('GET', '/api/usage?group_by=endpoint', { token: payer.apiKey });
    expect(usage.body.rows).toEqual([expect.objectContaining({ group: '/api/ai/embeddings', requests: 1, input_tokens: 750 })]);
  });

  it('bills its own token count when the upstream reports none (never zero), and falls back to the next server', async () => {
    const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const res = await stack.client(payer.apiKey).embeddings.create({ model: 'remote-embed-no-usage', input: ['hello world', 'good morning'] });
    expect(res.usage.prompt_tokens).toBe(4);
    const fell = await stack.client(payer.apiKey).embeddings.create({ model: 'remote-embed-fallback', input: 'hello', encoding_format: 'float' });
    expect(fell.data[0].embedding[0]).toBeCloseTo(fakeEmbedding('hello')[0], 6);
    const rows = await waitFor(async () => {
      const found = await chatUsageRows(prisma, { namespace: payer.username });
      return found.length === 2 && found.every((r) => r.status === 'succeeded') ? found : undefined;
    });
    expect(rows.map((r) => [r.model, r.promptTokens, r.completionTokens])).toEqual([
      ['remote-embed-no-usage', 4, 0],
      ['remote-embed-fallback', 3, 0],
    ]);
    expect(rows[1].provider).toMatch(/^openai-compatible:embed@/);
  });

  it('refuses bad input with a 400 naming it, and counts inputs against tokens per minute', async () => {
    const cases: [Record<string, unknown>, number, RegExp][] = [
      [{ model: 'local-embed' }, 400, /input/],
      [{ model: 'local-embed', input: [] }, 400, /^input must be a string, an array of at most 2048 strings/],
      [{ model: 'local-embed', input: Array.from({ length: 2049 }, () => 'x') }, 400, /^input must be/],
      [{ model: 'local-embed', input: [1, 'a'] }, 400, /^input must be/],
      [{ model: 'local-embed', input: ['ok', ''] }, 400, /^input\[1\] is empty/],
      [{ model: 'local-embed', input: 'x', encoding_format: 'hex' }, 400, /encoding_format/],
      [{ model: 'local-embed', input: 'x', dimensions: 1000 }, 400, /dimensions/],
      [{ model: 'remote-embed', input: 'x', dimensions: 4 }, 400, /^dimensions cannot be changed for model remote-embed/],
      [{ model: 'local-embed', input: 'word '.repeat(9000) }, 400, /^input is longer than the 8192 tokens model local-embed takes per input$/],
      [{ model: 'local-chat', input: 'x' }, 400, /^Model local-chat is not an embedding model; use POST \/api\/ai\/chat\/completions for it$/],
      [{ model: 'nope', input: 'x' }, 404, /^Model not found: nope$/],
    ];
    for (const [body, status, message] of cases) {
      const res = await stack.gw.http.request<{ error: { message: string } }>('POST', '/api/ai/embeddings', { token: user.apiKey, body });
      expect({ input: JSON.stringify(body).slice(0, 80), status: res.status, message: res.body.error?.message }).toEqual({ input: JSON.stringify(body).slice(0, 80), status, message: expect.stringMatching(message) });
    }
    // Token id inputs are accepted and counted by their ids.
    const ids = await client.embeddings.create({ model: 'local-embed', input: [[1, 2, 3], [4, 5]], encoding_format: 'float' });
    expect(ids.usage.prompt_tokens).toBe(5);

    const limited = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const key = await stack.gw.http.request<{ api_key: string }>('POST', '/api/api_keys', { token: limited.apiKey, body: { name: 'tpm', limits: { tpm: 20 } } });
    expect(key.status).toBe(201);
    const tooMany = await stack.gw.http.request<{ error: { message: string } }>('POST', '/api/ai/embeddings', { token: key.body.api_key, body: { model: 'local-embed', input: 'word '.repeat(30).trim() } });
    expect(tooMany.status).toBe(429);
    expect(tooMany.body.error.message).toMatch(/^This request's inputs hold 30 tokens, more than the 20 tokens per minute/);
    const fits = await stack.gw.http.request('POST', '/api/ai/embeddings', { token: key.body.api_key, body: { model: 'local-embed', input: 'word '.repeat(15).trim() } });
    expect(fits.status).toBe(200);
    expect(fits.headers['x-ratelimit-remaining-tokens']).toBe('5');
    const second = await stack.gw.http.request('POST', '/api/ai/embeddings', { token: key.body.api_key, body: { model: 'local-embed', input: 'word '.repeat(15).trim() } });
    expect(second.status).toBe(429);
  });
});
