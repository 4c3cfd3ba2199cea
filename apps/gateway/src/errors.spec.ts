import { createTenant, type Tenant } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';

const envelope = (type: string, message: RegExp | string) => ({
  error: { type, title: expect.any(String), message: typeof message === 'string' ? message : expect.stringMatching(message) },
  status: 'error',
  status_message: type,
});

describe('gateway error envelope', () => {
  let gw: GatewayHarness;
  let user: Tenant;

  beforeAll(async () => {
    gw = await startGateway({ BODY_LIMIT_BYTES: '4096' });
    user = await createTenant(gw.http, gw.adminToken);
  });
  afterAll(() => gw?.close());

  it('answers malformed JSON with 400', async () => {
    const res = await gw.http.request('POST', '/api/admin/users', {
      token: gw.adminToken,
      rawBody: '{"username": "x",',
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(400);
    expect(res.body).toEqual(envelope('invalid_request', /not valid JSON/));
  });

  it('answers an empty JSON body with 400', async () => {
    const res = await gw.http.request('POST', '/api/admin/users', {
      token: gw.adminToken,
      rawBody: '',
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ status: 'error', error: { type: 'invalid_request' } });
  });

  it.each([
    ['a wrong type', { username: 123 }, /username must be a string/],
    ['a non-object body', ['alice'], /Request body must be a JSON object/],
    ['an unknown field', { username: 'fine-name', colour: 'red' }, /unknown field\(s\): colour/],
    ['an invalid name', { username: 'Bad Name!' }, /username must be 1-40 lowercase/],
    ['negative credits', { username: 'someone-new', credits: -5 }, /credits must not be negative/],
  ])('answers %s with 400 naming the field', async (_label, body, message) => {
    const res = await gw.http.request('POST', '/api/admin/users', { token: gw.adminToken, body });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject(envelope('invalid_request', message));
  });

  it('answers unknown routes with 404 in the envelope', async () => {
    const res = await gw.http.request('GET', '/api/does-not-exist', { token: user.apiKey });
    expect(res.status).toBe(404);
    expect(res.body).toEqual(envelope('route_not_found', 'Cannot GET /api/does-not-exist'));
  });

  it('answers bodies over the configured limit with 413', async () => {
    const res = await gw.http.request('POST', '/api/admin/users', {
      token: gw.adminToken,
      body: { username: 'big', padding: 'x'.repeat(8192) },
    });
    expect(res.status).toBe(413);
    expect(res.body).toEqual(envelope('payload_too_large', /too large/));
  });

  it('refuses JSON nested deeper than the limit with 400 naming it, in any field', async () => {
    const deep = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;
    for (const field of ['response_format', 'max_tokens', 'messages', 'model']) {
      const res = await gw.http.request('POST', '/api/ai/chat/completions', {
        token: user.apiKey,
        rawBody: `{"model":"local-chat","messages":[{"role":"user","content":"hi"}],"${field}":${deep(1000)}}`,
        headers: { 'content-type': 'application/json' },
      });
      expect(res.status).toBe(400);
      expect(res.body).toEqual(envelope('invalid_request', /nesting is limited to 64 levels/));
    }
    for (const [where, body] of [
      ['role', `{"model":"local-chat","messages":[{"role":${deep(500)},"content":"hi"}]}`],
      ['content', `{"model":"local-chat","messages":[{"role":"user","content":${'{"a":'.repeat(300)}1${'}'.repeat(300)}}]}`],
    ]) {
      const res = await gw.http.request('POST', '/api/ai/chat/completions', { token: user.apiKey, rawBody: body, headers: { 'content-type': 'application/json' } });
      expect({ where, status: res.status }).toEqual({ where, status: 400 });
    }
    // Brackets inside strings are text, not nesting: this body fails on its name, not on depth.
    const text = await gw.http.request('POST', '/api/admin/users', { token: gw.adminToken, body: { username: '['.repeat(1000) } });
    expect(text.status).toBe(400);
    expect(text.body).toMatchObject({ error: { type: 'invalid_request', message: expect.stringMatching(/^username must be/) } });
  });

  it('refuses __proto__ and constructor.prototype keys with a message that says so', async () => {
    for (const raw of ['{"__proto__":{"admin":true},"username":"x"}', '{"username":"x","constructor":{"prototype":{"admin":true}}}']) {
      const res = await gw.http.request('POST', '/api/admin/users', { token: gw.adminToken, rawBody: raw, headers: { 'content-type': 'application/json' } });
      expect(res.status).toBe(400);
      expect(res.body).toEqual(envelope('invalid_request', /"__proto__" and "constructor.prototype" are not accepted/));
    }
  });

  it('answers what the fuzzer found with the envelope and a 4xx, never a framework body or a 500', async () => {
    const cases: [string, string, string | undefined, RegExp][] = [
      ['GET', '/api/repos/x/%ED%A0%80/fine_tunes', undefined, /not a valid url/],
      ['GET', `/api/repos/${user.namespace}/%00/branches`, undefined, /NUL/],
      ['GET', '/api/ai/queue?offset=9223372036854776000', undefined, /offset must be an integer between 0 and 1000000/],
      ['POST', '/api/ai/queue', '{"model":"local-image","prompt":"a\\ud83dz"}', /unpaired surrogate/],
      ['POST', '/api/ai/queue', '{"model":"local-image","prompt":"a\\u0000b"}', /NUL/],
    ];
    for (const [method, url, rawBody, message] of cases) {
      const res = await gw.http.request(method as 'GET', url, { token: user.apiKey, rawBody, headers: rawBody ? { 'content-type': 'application/json' } : {} });
      expect({ url, status: res.status, body: res.body }).toEqual({ url, status: 400, body: envelope('invalid_request', message) });
    }
    // Refused by Node's HTTP parser before Fastify sees it: still the envelope.
    await gw.app.listen({ port: 0, host: '127.0.0.1' });
    const long = await fetch(`${await gw.app.getUrl()}/api/ai/queue/${'A'.repeat(20_000)}`, { headers: { authorization: `Bearer ${user.apiKey}` } });
    expect(long.status).toBe(431);
    expect(await long.json()).toEqual(envelope('headers_too_large', /16 KiB/));
  });

  it('answers an unsupported content type with 415', async () => {
    const res = await gw.http.request('POST', '/api/admin/users', {
      token: gw.adminToken,
      rawBody: 'username=alice',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(res.status).toBe(415);
    expect(res.body).toMatchObject({ status: 'error', status_message: 'unsupported_media_type' });
    const text = await gw.http.request('POST', '/api/admin/users', {
      token: gw.adminToken,
      rawBody: 'username=alice',
      headers: { 'content-type': 'text/plain' },
    });
    expect(text.status).toBe(415);
    expect(text.body).toMatchObject({ status: 'error', status_message: 'unsupported_media_type' });
  });

  it('answers unknown models with the spec text', async () => {
    const res = await gw.http.request('GET', '/api/ai/models/nope-9000', { token: user.apiKey });
    expect(res.status).toBe(404);
    expect(res.body).toEqual(envelope('resource_not_found', 'Model not found: nope-9000'));
  });

  it('echoes a request id on every response', async () => {
    const res = await gw.http.request('GET', '/api/ai/models/nope', { token: user.apiKey, headers: { 'x-request-id': 'trace-123' } });
    expect(res.headers['x-request-id']).toBe('trace-123');
    // Answers Fastify gives before any controller: an unknown route, a URL that is not UTF-8, a body refused unread.
    const unknown = await gw.http.request('GET', '/api/no-such-route', { token: user.apiKey, headers: { 'x-request-id': 'trace-124' } });
    expect([unknown.status, unknown.headers['x-request-id']]).toEqual([404, 'trace-124']);
    const badUrl = await gw.http.request('GET', '/api/ai/models/%E0%A4%A', { token: user.apiKey, headers: { 'x-request-id': 'trace-125' } });
    expect([badUrl.status, badUrl.headers['x-request-id']]).toEqual([400, 'trace-125']);
    const badType = await gw.http.request('POST', '/api/admin/users', { token: gw.adminToken, rawBody: 'x', headers: { 'content-type': 'application/xml', 'x-request-id': 'trace-126' } });
    expect([badType.status, badType.headers['x-request-id']]).toEqual([415, 'trace-126']);
  });
});

/**
 * Over real HTTP with Node's fetch (undici, which the OpenAI SDK uses): an answer sent while the
 * client is still uploading used to reach it as EPIPE. Bodies must be larger than what loopback
 * socket buffers absorb (a few MiB) for that to show.
 */
describe('413 over real HTTP', () => {
  const LIMIT = 32 << 20;
  let gw: GatewayHarness;
  let user: Tenant;
  let base: string;
  const post = (body: string | ReadableStream<Uint8Array>, extra: RequestInit & { duplex?: 'half' } = {}) =>
    fetch(`${base}/api/ai/chat/completions`, {
      method: 'POST',
      body,
      ...extra,
      headers: { authorization: `Bearer ${user.apiKey}`, 'content-type': 'application/json' },
    });

  beforeAll(async () => {
    gw = await startGateway({ BODY_LIMIT_BYTES: String(LIMIT) });
    user = await createTenant(gw.http, gw.adminToken);
    await gw.app.listen({ port: 0, host: '127.0.0.1' });
    base = await gw.app.getUrl();
  });
  afterAll(() => gw?.close());

  it('reaches fetch as the 413 envelope, with a length or chunked, on a connection left open', async () => {
    const body = JSON.stringify({ model: 'local-chat', messages: [{ role: 'user', content: 'x'.repeat(2 * LIMIT) }] });
    const sized = await post(body);
    expect(sized.status).toBe(413);
    // The body was read to its end, so the server has no reason to close (it used to, and the
    // close raced the client's upload: fetch then failed with EPIPE on a loaded machine).
    expect(sized.headers.get('connection')).not.toBe('close');
    expect(await sized.json()).toEqual(envelope('payload_too_large', /too large/));
    const chunked = await post(new Blob([body]).stream(), { duplex: 'half' });
    expect(chunked.status).toBe(413);
    expect(await chunked.json()).toEqual(envelope('payload_too_large', /too large/));
    expect(chunked.headers.get('connection')).not.toBe('close');
  }, 30_000);

  it('stops reading beyond 4x the limit and closes the connection', async () => {
    const outcome = await post('x'.repeat(5 * LIMIT)).then(
      (r) => (r.headers.get('connection') === 'close' ? r.status : `kept open (${r.status})`),
      (err: Error) => (err.cause as { code?: string } | undefined)?.code ?? err.message,
    );
    // Either the client saw the 413 before the close, or the upload was cut: never a hang.
    expect([413, 'EPIPE', 'ECONNRESET', 'UND_ERR_SOCKET']).toContain(outcome);
  }, 30_000);
});
