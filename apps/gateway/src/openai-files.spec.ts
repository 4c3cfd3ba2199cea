import OpenAI, { toFile } from 'openai';
import { FilesSweeper, fileUuid } from '@atelier/batch';
import { PrismaService } from '@atelier/db';
import { BlobStore } from '@atelier/storage';
import { createTenant, type Tenant, openAiError } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';

const LINES = [
  { custom_id: 'a', method: 'POST', url: '/v1/chat/completions', body: { model: 'local-chat', messages: [{ role: 'user', content: 'hi' }] } },
  { custom_id: 'b', method: 'POST', url: '/v1/chat/completions', body: { model: 'local-chat', messages: [{ role: 'user', content: 'there' }] } },
];
const JSONL = LINES.map((l) => JSON.stringify(l)).join('\n') + '\n';

/** OpenAI's Files API (batch input) through the official SDK, against a listening gateway and its blob store. */
describe('files (POST/GET/DELETE /api/ai/files)', () => {
  let gw: GatewayHarness;
  let base: string;
  let owner: Tenant;
  let other: Tenant;
  const client = (t: Tenant) => new OpenAI({ apiKey: t.apiKey, baseURL: `${base}/api/ai`, maxRetries: 0, timeout: 20_000 });

  beforeAll(async () => {
    gw = await startGateway({ FILES_MAX_BYTES: '4096' });
    await gw.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(gw.app.getHttpServer().address() as { port: number }).port}`;
    owner = await createTenant(gw.http, gw.adminToken, '1');
    other = await createTenant(gw.http, gw.adminToken, '1');
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('uploads a JSONL file, reads it back byte for byte, lists it newest first with a cursor, and deletes it', async () => {
    const files = client(owner);
    const made = await files.files.create({ file: await toFile(Buffer.from(JSONL), 'batch.jsonl'), purpose: 'batch' });
    expect(made).toMatchObject({ id: expect.stringMatching(/^file-[0-9a-f]{32}$/), object: 'file', bytes: Buffer.byteLength(JSONL), filename: 'batch.jsonl', purpose: 'batch', status: 'processed' });
    // Kept FILES_TTL_DAYS (30) by default.
    expect(made.expires_at! - made.created_at).toBe(30 * 86_400);
    expect(await files.files.retrieve(made.id)).toEqual(made);
    expect(await (await files.files.content(made.id)).text()).toBe(JSONL);

    const second = await files.files.create({ file: await toFile(Buffer.from('{}\n'), 'second.jsonl'), purpose: 'user_data', expires_after: { anchor: 'created_at', seconds: 3600 } });
    expect(second.expires_at! - second.created_at).toBe(3600);
    const listed = await files.files.list();
    expect(listed.data.map((f) => f.id)).toEqual([second.id, made.id]);
    const page = await files.files.list({ limit: 1 });
    expect(page.data.map((f) => f.id)).toEqual([second.id]);
    expect(page.hasNextPage()).toBe(true);
    expect((await page.getNextPage()).data.map((f) => f.id)).toEqual([made.id]);
    expect((await files.files.list({ purpose: 'batch' })).data.map((f) => f.id)).toEqual([made.id]);

    expect(await files.files.delete(made.id)).toEqual({ id: made.id, object: 'file', deleted: true });
    expect(await openAiError(files.files.retrieve(made.id))).toEqual({ status: 404, message: `No such File object: ${made.id}` });
    expect(await openAiError(files.files.content(made.id))).toMatchObject({ status: 404 });
    expect(await openAiError(files.files.delete(made.id))).toMatchObject({ status: 404 });
  });

  it("keeps each namespace's files its own: another cannot read, download, list, delete or collide with one by name", async () => {
    const mine = await client(owner).files.create({ file: await toFile(Buffer.from(JSONL), 'shared-name.jsonl'), purpose: 'batch' });
    const stranger = client(other);
    expect(await openAiError(stranger.files.retrieve(mine.id))).toEqual({ status: 404, message: `No such File object: ${mine.id}` });
    expect(await openAiError(stranger.files.content(mine.id))).toMatchObject({ status: 404 });
    expect(await openAiError(stranger.files.delete(mine.id))).toMatchObject({ status: 404 });
    expect((await stranger.files.list()).data.map((f) => f.id)).not.toContain(mine.id);
    // The same file name in another namespace is another file; neither touches the other's bytes.
    const theirs = await stranger.files.create({ file: await toFile(Buffer.from('{"theirs": true}\n'), 'shared-name.jsonl'), purpose: 'batch' });
    expect(theirs.id).not.toBe(mine.id);
    expect(await (await client(owner).files.content(mine.id)).text()).toBe(JSONL);
    expect(await (await stranger.files.content(theirs.id)).text()).toBe('{"theirs": true}\n');
    // A key limited to other scopes cannot use files at all.
    const scoped = await gw.http.request<{ api_key: string }>('POST', '/api/api_keys', { token: owner.apiKey, body: { name: 'chat only', scopes: ['chat'] } });
    expect(await openAiError(new OpenAI({ apiKey: scoped.body.api_key, baseURL: `${base}/api/ai`, maxRetries: 0 }).files.retrieve(mine.id))).toMatchObject({ status: 403 });
  });

  it('answers 404 for a file past its expiry at once, and the sweep then deletes its record and its bytes, only its', async () => {
    const files = client(owner);
    const old = await files.files.create({ file: await toFile(Buffer.from(JSONL), 'old.jsonl'), purpose: 'batch' });
    const fresh = await files.files.create({ file: await toFile(Buffer.from(JSONL), 'fresh.jsonl'), purpose: 'batch' });
    const prisma = gw.app.get(PrismaService);
    const { blobKey } = await prisma.storedFile.update({ where: { id: fileUuid(old.id)! }, data: { expiresAt: new Date(Date.now() - 1000) } });
    expect(await openAiError(files.files.retrieve(old.id))).toMatchObject({ status: 404 });
    expect((await files.files.list()).data.map((f) => f.id)).not.toContain(old.id);
    const blobs = gw.app.get(BlobStore);
    expect(await blobs.head(blobKey)).toBeDefined();
    // Two replicas sweeping at once: each expired file is deleted once.
    const swept = await Promise.all([gw.app.get(FilesSweeper).sweep(), gw.app.get(FilesSweeper).sweep()]);
    expect(swept.reduce((a, b) => a + b, 0)).toBe(1);
    expect(await prisma.storedFile.findUnique({ where: { id: fileUuid(old.id)! } })).toBeNull();
    expect(await blobs.head(blobKey)).toBeUndefined();
    expect(await (await files.files.content(fresh.id)).text()).toBe(JSONL);
  });

  it('refuses a bad upload with a 400 or 413 that says why, and keeps nothing of it', async () => {
    const files = client(owner);
    const before = (await files.files.list()).data.length;
    expect(await openAiError(files.files.create({ file: await toFile(Buffer.from(JSONL), 'x.jsonl'), purpose: 'fine-tune' as 'batch' }))).toEqual({ status: 400, message: "purpose must be one of batch, user_data (got 'fine-tune')" });
    expect(await openAiError(files.files.create({ file: await toFile(Buffer.alloc(5000, 'x'), 'big.jsonl'), purpose: 'batch' }))).toEqual({ status: 413, message: 'A file may be at most 4096 bytes (FILES_MAX_BYTES)' });
    expect(
      await openAiError(files.files.create({ file: await toFile(Buffer.from('{}'), 'x.jsonl'), purpose: 'batch', expires_after: { anchor: 'created_at', seconds: 60 } })),
    ).toMatchObject({ status: 400, message: expect.stringContaining('expires_after[seconds]') });
    const noFile = await fetch(`${base}/api/ai/files`, { method: 'POST', headers: { authorization: `Bearer ${owner.apiKey}` }, body: (() => { const f = new FormData(); f.set('purpose', 'batch'); return f; })() });
    expect(noFile.status).toBe(400);
    expect(((await noFile.json()) as { error: { message: string } }).error.message).toMatch(/^file is required/);
    expect((await files.files.list()).data.length).toBe(before);
    expect(await openAiError(files.files.retrieve('file-nope'))).toMatchObject({ status: 404 });
  });
});
