import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { ApiError, UploadItem } from '@atelier/contracts';
import { PrismaService } from '@atelier/db';
import { LocalBlobStore } from '@atelier/storage';
import { createTestEnvironment, createUserNamespace, type TestEnvironment } from '@atelier/testing';
import { RepositoriesService, type RepositoryActor } from './repositories.service';
import { ReposRepository } from './repos.repository';

/** Repositories of files per namespace, against a real Postgres and a real blob directory. */
describe('RepositoriesService', () => {
  let env: TestEnvironment;
  let prisma: PrismaService;
  let blobDir: string;
  let blobs: LocalBlobStore;
  let repos: RepositoriesService;

  async function actor(): Promise<RepositoryActor> {
    const { userId, namespaceId, name } = await createUserNamespace(prisma);
    return { namespaceId, namespace: name, userId };
  }
  async function* upload(files: Record<string, string>, message?: string): AsyncIterable<UploadItem> {
    if (message !== undefined) yield { kind: 'field', name: 'message', value: message };
    for (const [filename, text] of Object.entries(files))
      yield { kind: 'file', fieldname: 'files[]', filename, mimetype: 'text/plain', stream: Readable.from([Buffer.from(text)]), truncated: () => false };
  }
  const read = async (body: NodeJS.ReadableStream) => {
    const chunks: Buffer[] = [];
    for await (const c of body) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString();
  };
  const refusal = (p: Promise<unknown>) => p.then(() => undefined, (err: ApiError) => err.status);
  /** Files in the blob directory (the store's own metadata files included). */
  const blobCount = () => readdirSync(blobDir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).length;

  beforeAll(async () => {
    env = await createTestEnvironment({ LOG_LEVEL: 'silent' });
    prisma = new PrismaService(env.config);
    blobDir = mkdtempSync(path.join(tmpdir(), 'atelier-repos-spec-'));
    blobs = new LocalBlobStore(blobDir);
    repos = new RepositoriesService(new ReposRepository(prisma), blobs);
  });
  afterAll(async () => {
    await prisma?.$disconnect();
    await env?.cleanup();
    rmSync(blobDir, { recursive: true, force: true });
  });

  it('commits an upload, serves its bytes back, and frees a replaced blob nothing else points at', async () => {
    const me = await actor();
    await repos.create(me, 'data');
    const repo = await repos.find(me.namespaceId, me.namespace, 'data');
    const first = await repos.upload(repo, 'main', 'sets', upload({ 'a.txt': 'one', 'b.txt': 'two' }, 'first'), { userId: me.userId, username: me.namespace });
    expect(first).toMatchObject({ branch: 'main', message: 'first', author: me.namespace, files: [{ path: 'sets/a.txt', size: 3 }, { path: 'sets/b.txt', size: 3 }] });
    const oldKey = (await repos.findFile(repo.id, 'main', 'sets/a.txt'))!.blobKey;
    await repos.upload(repo, 'main', 'sets', upload({ 'a.txt': 'one, again' }), { userId: me.userId, username: me.namespace });
    const { blob } = await repos.download(repo, 'main', 'sets/a.txt');
    expect(await read(blob.body)).toBe('one, again');
    expect(await blobs.get(oldKey)).toBeUndefined();
    expect((await repos.describe(repo)).files.map((f) => f.path)).toEqual(['sets/a.txt', 'sets/b.txt']);
  });

  it('branches share their blobs: a file replaced on one branch stays on the other', async () => {
    const me = await actor();
    await repos.create(me, 'shared');
    const repo = await repos.find(me.namespaceId, me.namespace, 'shared');
    await repos.upload(repo, 'main', '', upload({ 'x.txt': 'main copy' }), { userId: me.userId, username: me.namespace });
    expect((await repos.createBranch(repo, 'dev')).name).toBe('dev');
    await repos.upload(repo, 'dev', '', upload({ 'x.txt': 'dev copy' }), { userId: me.userId, username: me.namespace });
    expect(await read((await repos.download(repo, 'main', 'x.txt')).blob.body)).toBe('main copy');
    expect(await read((await repos.download(repo, 'dev', 'x.txt')).blob.body)).toBe('dev copy');
    expect(await refusal(repos.createBranch(repo, 'dev'))).toBe(409);
    expect(await refusal(repos.createBranch(repo, 'other', 'no-such-branch'))).toBe(404);
  });

  it("keeps namespaces apart: another namespace's repository of the same name is its own, and a name taken in one namespace is 409 there only", async () => {
    const [ann, ben] = [await actor(), await actor()];
    await repos.create(ann, 'same');
    await repos.create(ben, 'same');
    expect(await refusal(repos.create(ann, 'same'))).toBe(409);
    const annRepo = await repos.find(ann.namespaceId, ann.namespace, 'same');
    const benRepo = await repos.find(ben.namespaceId, ben.namespace, 'same');
    expect(annRepo.id).not.toBe(benRepo.id);
    await repos.upload(annRepo, 'main', '', upload({ 'secret.txt': "ann's" }), { userId: ann.userId, username: ann.namespace });
    expect(await refusal(repos.download(benRepo, 'main', 'secret.txt'))).toBe(404);
    expect(await refusal(repos.find(ben.namespaceId, ben.namespace, 'only-ann-has-it'))).toBe(404);
  });

  it('records nothing and keeps no blob of an upload it refuses', async () => {
    const me = await actor();
    await repos.create(me, 'strict');
    const repo = await repos.find(me.namespaceId, me.namespace, 'strict');
    const before = blobCount();
    async function* twice(): AsyncIterable<UploadItem> {
      yield* upload({ 'dup.txt': 'one' });
      yield* upload({ 'dup.txt': 'two' });
    }
    expect(await refusal(repos.upload(repo, 'main', '', twice(), { userId: me.userId, username: me.namespace }))).toBe(400);
    expect(await refusal(repos.upload(repo, 'main', '', upload({}), { userId: me.userId, username: me.namespace }))).toBe(400);
    expect(blobCount()).toBe(before);
    expect((await repos.describe(repo)).files).toEqual([]);
  });
});
