import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parquetWriteBuffer } from 'hyparquet-writer';
import type { AddressInfo } from 'node:net';
import { bundledFfmpegPath } from '@atelier/media';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { PrismaService } from '@atelier/db';
import { FineTuneServiceModule } from '@atelier/fine-tune';
import { createService } from '@atelier/runtime';
import { BlobStore, SignedUrls } from '@atelier/storage';
import { createTenant, uniqueName, waitFor, type Tenant } from '@atelier/testing';
import { startAssetServer, startMediaStack, type AssetServer, type MediaStack } from './media.harness';
import { uploadFiles } from './repos.harness';

type ErrorBody = { error: { type: string; message: string } };
type MadeKey = { api_key: string; prefix: string; limits: Record<string, number> | null; budget: { max_spend: string } | null; scopes: string[] | null; expires_at: string | null };

/**
 * The security round's attacks, each sent through the real gateway as an attacker would: a
 * client's X-Request-Id sharing one max_concurrent slot, a limited key minting an unlimited one,
 * replays that skipped scopes and rate limits, a former org member's key, a playlist posing as
 * an MP4, IPv4 hidden in IPv6, an image declaring a huge canvas, an object-prototype asset name,
 * and one key opening event streams without end. The attacks that need a process of their own
 * (memory, slow clients) are in security-process.spec.ts.
 */
describe('security: attacks through the gateway', () => {
  let stack: MediaStack;
  let assets: AssetServer;
  let base: string;
  let prisma: PrismaService;
  let fineTune: NestFastifyApplication;
  const sandbox = mkdtempSync(path.join(tmpdir(), 'atelier-security-'));
  let localVideo: string;

  beforeAll(async () => {
    // A real MP4 on this machine's disk: what a playlist would make ffmpeg read.
    localVideo = path.join(sandbox, 'private.mp4');
    const made = spawnSync(bundledFfmpegPath(), ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc=size=64x64:rate=10', '-t', '1', '-pix_fmt', 'yuv420p', '-y', localVideo]);
    if (made.status !== 0) throw new Error(`ffmpeg could not make the test video: ${made.stderr.toString()}`);
    const playlist = `#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:1\n#EXTINF:1.0,\nfile://${localVideo}\n#EXT-X-ENDLIST\n`;
    // An image that declares a 12000 x 12000 canvas (under sharp's own default limit, far over ours) in a few bytes (a PNG header and nothing to decode).
    const ihdr = Buffer.alloc(13);
    ihdr.writeUInt32BE(12000, 0);
    ihdr.writeUInt32BE(12000, 4);
    ihdr.set([8, 2, 0, 0, 0], 8);
    const chunk = (type: string, data: Buffer) => {
      const len = Buffer.alloc(4);
      len.writeUInt32BE(data.length);
      return Buffer.concat([len, Buffer.from(type, 'latin1'), data, Buffer.alloc(4)]);
    };
    const hugePng = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr), chunk('IDAT', Buffer.alloc(16)), chunk('IEND', Buffer.alloc(0))]);
    assets = await startAssetServer({
      '/clip.mp4': (_req, res) => res.writeHead(200, { 'content-type': 'video/mp4' }).end(playlist),
      '/huge.png': (_req, res) => res.writeHead(200, { 'content-type': 'image/png' }).end(hugePng),
    });
    stack = await startMediaStack({ MEDIA_FETCH_ALLOWED_HOSTS: `127.0.0.1:${assets.port}`, LOCAL_ENGINE_LATENCY_MS: '1500', EVENTS_MAX_STREAMS_PER_KEY: '2', DATASET_MAX_ROWS: '1000' });
    await stack.gw.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(stack.gw.app.getHttpServer().address() as AddressInfo).port}`;
    prisma = stack.gw.app.get(PrismaService);
    // Reads fine-tune datasets for the gateway (fine-tune-inspect).
    fineTune = await createService(FineTuneServiceModule.forRoot(stack.gw.env.config), stack.gw.env.config, { service: 'fine-tune' });
  }, 60_000);
  afterAll(async () => {
    await fineTune?.close();
    await stack?.close();
    await assets?.close();
  });

  const tenant = (credits = '100') => createTenant(stack.gw.http, stack.gw.adminToken, credits);
  const post = <T = ErrorBody>(url: string, token: string, body: unknown, headers: Record<string, string> = {}) => stack.gw.http.request<T>('POST', url, { token, body, headers });
  const makeKey = (token: string, body: Record<string, unknown>) => post<MadeKey & ErrorBody>('/api/api_keys', token, { name: 'child', ...body });

  it('counts every request in max_concurrent, whatever X-Request-Id the client sends', async () => {
    const t = await tenant();
    const key = (await makeKey(t.apiKey, { limits: { max_concurrent: 2 } })).body;
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => post('/api/ai/images/generate', key.api_key, { model: 'local-image', prompt: 'a lighthouse' }, { 'x-request-id': 'aaaaaaaa' })),
    );
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses).toEqual([200, 200, 429, 429, 429, 429]);
    // The id still correlates: every answer carries the client's.
    expect(answers.every((a) => a.headers['x-request-id'] === 'aaaaaaaa')).toBe(true);
  });

  describe('keys made by keys', () => {
    it("refuses a key above its maker's limits, scopes or expiry (403 saying which), and fills in the maker's where omitted", async () => {
      const t = await tenant();
      const expires = new Date(Date.now() + 3600_000).toISOString();
      const maker = (await post<MadeKey>('/api/admin/users/' + t.username + '/api_keys', stack.gw.adminToken, { limits: { rpm: 5, max_concurrent: 2 }, expires_at: expires })).body;
      const over = await makeKey(maker.api_key, { limits: { rpm: 6 } });
      expect(over.status).toBe(403);
      expect(over.body.error.message).toBe(`limits.rpm must not exceed 5, the limit of the key making it (${maker.prefix})`);
      const later = await makeKey(maker.api_key, { expires_at: new Date(Date.now() + 7200_000).toISOString() });
      expect(later.status).toBe(403);
      expect(later.body.error.message).toMatch(/^expires_at must not be later than .*, when the key making it/);
      const plain = await makeKey(maker.api_key, {});
      expect(plain.status).toBe(201);
      expect(plain.body.limits).toEqual({ rpm: 5, max_concurrent: 2 });
      expect(Date.parse(plain.body.expires_at!)).toBe(Date.parse(expires));
    });

    it("counts a child's requests against its maker's rpm: two keys do not double the rate", async () => {
      const t = await tenant();
      const maker = (await post<MadeKey>('/api/admin/users/' + t.username + '/api_keys', stack.gw.adminToken, { limits: { rpm: 3 } })).body;
      const child = (await makeKey(maker.api_key, { limits: { rpm: 3 } })).body;
      const enqueue = (token: string) => post('/api/ai/queue', token, { model: 'local-image', prompt: 'a lighthouse' });
      const work = [];
      for (let i = 0; i < 4; i++) work.push((await enqueue(i === 1 ? maker.api_key : child.api_key)).status);
      expect(work).toEqual([200, 200, 200, 429]);
      const refused = await enqueue(child.api_key);
      expect(refused.body.error.message).toMatch(new RegExp(`for API key ${maker.prefix}, which made this key`));
    });

    it("carves a child's budget out of what its maker has left, so the two never spend more than the maker could", async () => {
      const t = await tenant();
      const maker = (await post<MadeKey>('/api/admin/users/' + t.username + '/api_keys', stack.gw.adminToken, { budget: { max_spend: '0.01', period: 'month' }, limits: { rpm: 10 } })).body;
      // The attack of the audit: an unbudgeted, unlimited key from a budgeted, rate-limited one.
      const unlimited = await makeKey(maker.api_key, {});
      expect(unlimited.status).toBe(403);
      expect(unlimited.body.error.message).toBe(
        `The key making it (${maker.prefix}) has a budget: give the new key a budget of its own, at most 0.01 per month (what it has left)`,
      );
      const more = await makeKey(maker.api_key, { budget: { max_spend: '0.02', period: 'month' } });
      expect(more.status).toBe(403);
      expect(more.body.error.message).toBe(`budget.max_spend must not exceed 0.01, what the key making it (${maker.prefix}) has left of its budget this month`);
      const child = await makeKey(maker.api_key, { budget: { max_spend: '0.004', period: 'month' } });
      expect(child.status).toBe(201);
      expect(child.body.limits).toEqual({ rpm: 10 });
      const listed = await stack.gw.http.request<{ data: MadeKey[] }>('GET', '/api/api_keys', { token: t.apiKey });
      expect(listed.body.data.find((k) => k.prefix === maker.prefix)?.budget).toMatchObject({ max_spend: '0.006' });
    });

    it("revokes the keys a revoked key made, at any depth, on every replica, and gives the unspent carved budget back to the maker", async () => {
      const t = await tenant();
      const maker = (await post<MadeKey>('/api/admin/users/' + t.username + '/api_keys', stack.gw.adminToken, { budget: { max_spend: '0.01', period: 'month' } })).body;
      const child = (await makeKey(maker.api_key, { budget: { max_spend: '0.004', period: 'month' } })).body;
      const grandchild = (await makeKey(child.api_key, { budget: { max_spend: '0.001', period: 'month' } })).body;
      const replica = await stack.gw.replica();
      for (const via of [stack.gw.http, replica.http]) expect((await via.request('GET', '/api/credits', { token: grandchild.api_key })).status).toBe(200);
      const revoked = await stack.gw.http.request<{ prefix: string; revoked_keys: string[] }>('DELETE', `/api/api_keys/${child.prefix}`, { token: t.apiKey });
      expect(revoked.status).toBe(200);
      expect(revoked.body).toMatchObject({ prefix: child.prefix, revoked_keys: [grandchild.prefix] });
      for (const via of [stack.gw.http, replica.http])
        await waitFor(async () => (await via.request('GET', '/api/credits', { token: grandchild.api_key })).status === 401, { timeoutMs: 1_000, description: 'the grandchild key to be refused on every replica' });
      // Nothing was spent below the maker: its whole carved budget is back.
      const listed = await stack.gw.http.request<{ data: MadeKey[] }>('GET', '/api/api_keys', { token: t.apiKey });
      expect(listed.body.data.find((k) => k.prefix === maker.prefix)?.budget).toMatchObject({ max_spend: '0.01' });
      expect(listed.body.data.map((k) => k.prefix)).not.toEqual(expect.arrayContaining([child.prefix]));
      // Revoking again changes nothing and returns nothing twice.
      expect((await stack.gw.http.request('DELETE', `/api/api_keys/${child.prefix}`, { token: t.apiKey })).status).toBe(200);
      const again = await stack.gw.http.request<{ data: MadeKey[] }>('GET', '/api/api_keys', { token: t.apiKey });
      expect(again.body.data.find((k) => k.prefix === maker.prefix)?.budget).toMatchObject({ max_spend: '0.01' });
    });
  });

  it('serves stored bytes under /files so that none runs as a page on this origin: nosniff, a sandboxing CSP, HTML and SVG as attachments', async () => {
    const blobs = stack.gw.app.get(BlobStore);
    const urls = stack.gw.app.get(SignedUrls);
    const served = async (name: string, type: string, body: string) => {
      const key = `${uniqueName('ns')}/outputs/${name}`;
      await blobs.put(key, Buffer.from(body), type);
      // The link is made for PUBLIC_URL; the same path and signature on this gateway.
      const link = new URL(urls.url(key), base);
      const res = await fetch(`${base}${link.pathname}${link.search}`);
      expect(res.status).toBe(200);
      return res.headers;
    };
    for (const [name, type] of [['x.svg', 'image/svg+xml'], ['x.html', 'text/html'], ['x.xml', 'application/xml']] as const) {
      const headers = await served(name, type, '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(document.cookie)"/>');
      expect({ name, nosniff: headers.get('x-content-type-options'), csp: headers.get('content-security-policy'), disposition: headers.get('content-disposition') }).toEqual({
        name,
        nosniff: 'nosniff',
        csp: "sandbox; default-src 'none'",
        disposition: `attachment; filename="${name}"`,
      });
    }
    const png = await served('x.png', 'image/png', 'png bytes');
    expect(png.get('content-disposition')).toBe('inline; filename="x.png"');
    expect(png.get('content-security-policy')).toBe("sandbox; default-src 'none'");
  });

  it('answers an Idempotency-Key replay only to a caller the access guard admits: scopes and rpm hold', async () => {
    const t = await tenant();
    const body = { model: 'local-image', prompt: 'replayed' };
    const first = await post('/api/ai/images/generate', t.apiKey, body, { 'idempotency-key': 'k-1' });
    expect(first.status).toBe(200);
    const chatOnly = (await makeKey(t.apiKey, { scopes: ['chat'] })).body;
    const replayed = await post('/api/ai/images/generate', chatOnly.api_key, body, { 'idempotency-key': 'k-1' });
    expect(replayed.status).toBe(403);
    expect(replayed.headers['idempotent-replayed']).toBeUndefined();
    const limited = (await makeKey(t.apiKey, { limits: { rpm: 1 } })).body;
    const replays = [];
    for (let i = 0; i < 2; i++) replays.push(await post('/api/ai/images/generate', limited.api_key, body, { 'idempotency-key': 'k-1' }));
    expect(replays.map((r) => r.status)).toEqual([200, 429]);
    expect(replays[0].headers['idempotent-replayed']).toBe('true');
  });

  describe('org membership', () => {
    it("removing a member revokes the member's keys bound to the org on every replica; a member can leave", async () => {
      const [alice, bob] = [await tenant(), await tenant()];
      const org = uniqueName('org');
      expect((await post('/api/admin/orgs', stack.gw.adminToken, { name: org, members: [alice.username], credits: '5' })).status).toBe(201);
      const added = await stack.gw.http.request('PUT', `/api/admin/orgs/${org}/members/${bob.username}`, { token: stack.gw.adminToken });
      expect(added.body).toEqual({ org, username: bob.username, member: true, revoked_keys: [] });
      const orgKey = (await makeKey(bob.apiKey, { namespace: org })).body;
      const replica = await stack.gw.replica();
      for (const via of [stack.gw.http, replica.http]) expect((await via.request('GET', '/api/credits', { token: orgKey.api_key })).status).toBe(200);

      const removed = await stack.gw.http.request('DELETE', `/api/admin/orgs/${org}/members/${bob.username}`, { token: stack.gw.adminToken });
      expect(removed.body).toEqual({ org, username: bob.username, member: false, revoked_keys: [orgKey.prefix] });
      // The revocation broadcast reaches every replica within AUTH_CACHE_MS (here at once, as a rule).
      for (const via of [stack.gw.http, replica.http])
        await waitFor(async () => (await via.request('GET', '/api/credits', { token: orgKey.api_key })).status === 401, {
          timeoutMs: stack.gw.env.config.AUTH_CACHE_MS + 500,
          description: 'the removed member\'s org key to be refused',
        });
      // Bob's own key still works, and no longer reaches the org.
      expect((await stack.gw.http.request('GET', `/api/credits?namespace=${org}`, { token: bob.apiKey })).status).toBe(403);

      const aliceOrgKey = (await makeKey(alice.apiKey, { namespace: org })).body;
      const left = await stack.gw.http.request('DELETE', `/api/orgs/${org}/membership`, { token: alice.apiKey });
      expect(left.body).toEqual({ org, username: alice.username, member: false, revoked_keys: [aliceOrgKey.prefix] });
      await waitFor(async () => (await stack.gw.http.request('GET', '/api/credits', { token: aliceOrgKey.api_key })).status === 401, {
        timeoutMs: stack.gw.env.config.AUTH_CACHE_MS + 500,
        description: "the leaver's org key to be refused",
      });
      expect((await stack.gw.http.request('DELETE', `/api/orgs/${org}/membership`, { token: alice.apiKey })).status).toBe(404);
    });

    it('refuses a key bound to an org its owner left, even if its revocation was missed', async () => {
      const t = await tenant();
      const org = uniqueName('org');
      await post('/api/admin/orgs', stack.gw.adminToken, { name: org, members: [t.username] });
      const orgKey = (await makeKey(t.apiKey, { namespace: org })).body;
      // A membership removed behind the API's back (as before this round, there was no API for it).
      await prisma.$executeRaw`DELETE FROM memberships m USING organizations o WHERE o.id = m.org_id AND o.name = ${org}`;
      await new Promise((r) => setTimeout(r, stack.gw.env.config.AUTH_CACHE_MS + 50));
      const res = await stack.gw.http.request<ErrorBody>('GET', '/api/credits', { token: orgKey.api_key });
      expect(res.status).toBe(401);
      expect(res.body.error.message).toBe(`Invalid API key: its owner is no longer a member of ${org}`);
    });
  });

  describe('fine-tune datasets that claim more than they hold', () => {
    /** A Parquet file whose footer is a schema of `n` empty structs: a byte each, an object each once decoded. */
    const footerBomb = (n: number) => {
      const varint = (v: number) => {
        const out: number[] = [];
        while (v > 0x7f) {
          out.push((v & 0x7f) | 0x80);
          v = Math.floor(v / 128);
        }
        out.push(v);
        return out;
      };
      // FileMetaData: version (field 1, i32 1), schema (field 2, a list of n structs), each struct empty.
      const footer = Buffer.concat([Buffer.from([0x15, 0x02, 0x19, 0xfc, ...varint(n)]), Buffer.alloc(n, 0), Buffer.from([0x00])]);
      const length = Buffer.alloc(4);
      length.writeUInt32LE(footer.length);
      return Buffer.concat([Buffer.from('PAR1'), footer, length, Buffer.from('PAR1')]);
    };

    it('refuses a footer over DATASET_MAX_FOOTER_BYTES and more rows than DATASET_MAX_ROWS, before decoding them', async () => {
      const t = await tenant();
      expect((await stack.gw.http.request('POST', '/api/repos', { token: t.apiKey, body: { namespace: t.namespace, name: 'ds' } })).status).toBe(201);
      const upload = await uploadFiles(stack.gw.http, t.apiKey, `${t.namespace}/ds`, 'main', [
        { field: 'files[]', filename: 'bomb.parquet', content: footerBomb(5_000_000) },
        {
          field: 'files[]',
          filename: 'long.parquet',
          content: Buffer.from(
            parquetWriteBuffer({
              columnData: [
                { name: 'question', data: Array.from({ length: 2000 }, (_, i) => `q${i}`), type: 'STRING' },
                { name: 'answer', data: Array.from({ length: 2000 }, () => 'a'), type: 'STRING' },
              ],
            }),
          ),
        },
      ]);
      expect(upload.status).toBe(201);
      const create = (resource: string) =>
        post(`/api/repos/${t.namespace}/ds/fine_tunes`, t.apiKey, {
          resource,
          base_model: 'Qwen/Qwen3-0.6B',
          script_type: 'text_generation',
          training_params: { question_column: 'question', answer_column: 'answer' },
        });
      const bomb = await create('main/bomb.parquet');
      expect(bomb.status).toBe(400);
      expect(bomb.body.error.message).toMatch(/its footer \(metadata\) is 500\d{4} bytes, more than the 4194304 a dataset may have \(DATASET_MAX_FOOTER_BYTES\)/);
      const long = await create('main/long.parquet');
      expect(long.status).toBe(400);
      expect(long.body.error.message).toContain('it has 2000 rows, more than the 1000 a dataset may have (DATASET_MAX_ROWS)');
    });
  });

  it('does not let ffmpeg follow a playlist served as video/mp4 to a file on the media host', async () => {
    const t = await tenant();
    const res = await post('/api/ai/videos/generate', t.apiKey, { model: 'local-video', prompt: 'a walk', input_video: `${assets.base}/clip.mp4`, duration: 1 });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toBe('input_video must be an MP4, MOV or WebM video');
  });

  it('refuses IPv6 addresses that carry an IPv4 one (::a.b.c.d, 64:ff9b:1::/48) as input media', async () => {
    const t = await tenant();
    for (const host of [`[::7f00:1]:${assets.port}`, `[::127.0.0.1]:${assets.port}`, '[64:ff9b:1::a00:1]']) {
      const res = await post('/api/ai/images/edit', t.apiKey, { model: 'local-image-edit', prompt: 'blur', input_image: `http://${host}/huge.png` });
      expect({ host, status: res.status }).toEqual({ host, status: 400 });
      expect(res.body.error.message).toMatch(/^Refusing to fetch .* a (ipv4Compatible|ipv4Mapped|loopback|rfc8215|rfc6052) address/);
    }
  });

  it('refuses an image declaring a huge canvas in the video engine before decoding it', async () => {
    const t = await tenant();
    const res = await post('/api/ai/videos/generate', t.apiKey, { model: 'local-video', prompt: 'a walk', input_image: `${assets.base}/huge.png`, duration: 1 });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/pixel limit/);
  });

  it('answers an object-prototype name under /docs/assets with 404', async () => {
    for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      const res = await stack.gw.http.request<ErrorBody>('GET', `/docs/assets/${name}`);
      expect({ name, status: res.status }).toEqual({ name, status: 404 });
    }
  });

  it('caps the event streams one key holds open (429 past EVENTS_MAX_STREAMS_PER_KEY), and frees a slot when one closes', async () => {
    const t: Tenant = await tenant();
    const open = () => {
      const c = new AbortController();
      return fetch(`${base}/api/events`, { headers: { authorization: `Bearer ${t.apiKey}` }, signal: c.signal }).then((res) => ({ res, close: () => c.abort() }));
    };
    const streams = [await open(), await open()];
    expect(streams.map((s) => s.res.status)).toEqual([200, 200]);
    const third = await open();
    expect(third.res.status).toBe(429);
    expect(((await third.res.json()) as ErrorBody).error.message).toBe('Too many open event streams: at most 2 per API key at once (EVENTS_MAX_STREAMS_PER_KEY); close one first');
    streams[0].close();
    let again = await open();
    for (let i = 0; i < 50 && again.res.status === 429; i++) {
      await new Promise((r) => setTimeout(r, 20));
      again = await open();
    }
    expect(again.res.status).toBe(200);
    again.close();
    streams[1].close();
  });
});

