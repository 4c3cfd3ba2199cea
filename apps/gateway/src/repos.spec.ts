import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createTenant, uniqueName, type Tenant } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';
import { multipartBody, uploadFiles } from './repos.harness';

const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

function countFiles(dir: string): number {
  let n = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) n += countFiles(path.join(dir, entry.name));
    else if (!entry.name.endsWith('.meta')) n++;
  }
  return n;
}

describe('repositories', () => {
  let gw: GatewayHarness;
  let alice: Tenant;
  let bob: Tenant;
  let storageDir: string;

  beforeAll(async () => {
    storageDir = mkdtempSync(path.join(tmpdir(), 'atelier-repos-'));
    gw = await startGateway({ STORAGE_DIR: storageDir, REPO_UPLOAD_MAX_FILE_BYTES: '4096', REPO_UPLOAD_MAX_FILES: '3' });
    alice = await createTenant(gw.http, gw.adminToken);
    bob = await createTenant(gw.http, gw.adminToken);
  });
  afterAll(() => gw?.close());

  const createRepo = (token: string, namespace: string, name: string, description?: string) =>
    gw.http.request('POST', '/api/repos', { token, body: { namespace, name, ...(description ? { description } : {}) } });

  it('creates a repository with a main branch, and refuses duplicates with 409', async () => {
    const res = await createRepo(alice.apiKey, alice.namespace, 'datasets', 'training data');
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      repository: {
        namespace: alice.namespace,
        name: 'datasets',
        description: 'training data',
        created_at: expect.any(Number),
        branch: 'main',
        branches: [{ name: 'main', head_commit_id: null }],
        files: [],
      },
      status: 'success',
      status_message: 'resource_created',
    });
    const again = await createRepo(alice.apiKey, alice.namespace, 'datasets');
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ error: { type: 'conflict', message: `Repository '${alice.namespace}/datasets' already exists` } });
  });

  it('only lets namespace members create repositories there (403 otherwise), including org members', async () => {
    const foreign = await createRepo(bob.apiKey, alice.namespace, 'sneaky');
    expect(foreign.status).toBe(403);
    expect(foreign.body).toMatchObject({ status: 'error', error: { type: 'permission_denied' } });
    const org = uniqueName('org');
    const created = await gw.http.request('POST', '/api/admin/orgs', { token: gw.adminToken, body: { name: org, members: [alice.username] } });
    expect(created.status).toBe(201);
    expect((await createRepo(alice.apiKey, org, 'shared')).status).toBe(201);
    expect((await createRepo(bob.apiKey, org, 'shared2')).status).toBe(403);
  });

  it.each([
    ['a bad repository name', { namespace: 'x', name: '../etc' }, /Repository name '\.\.\/etc' is invalid/],
    ['an unknown field', { namespace: 'x', name: 'ok', colour: 'red' }, /unknown field\(s\): colour/],
    ['a missing name', { namespace: 'x' }, /name must be a string/],
  ])('answers %s with 400', async (_label, body, message) => {
    const payload = { ...body, namespace: alice.namespace };
    const res = await gw.http.request('POST', '/api/repos', { token: alice.apiKey, body: payload });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: { type: 'invalid_request', message: expect.stringMatching(message) } });
  });

  describe('files', () => {
    const repo = () => `${alice.namespace}/files-repo`;
    beforeAll(async () => {
      expect((await createRepo(alice.apiKey, alice.namespace, 'files-repo')).status).toBe(201);
    });

    it('uploads one file to the repository root and downloads the same bytes', async () => {
      const content = Buffer.from('PAR1 not really parquet but bytes');
      const res = await uploadFiles(gw.http, alice.apiKey, repo(), 'main', [{ filename: 'train.parquet', content }], { message: 'first data' });
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({
        commit: {
          id: expect.any(String),
          branch: 'main',
          message: 'first data',
          // The uploader by username, as a user reads it (not the internal user id).
          author: alice.username,
          timestamp: expect.any(Number),
          files: [{ path: 'train.parquet', size: content.length, sha256: sha256(content), content_type: 'application/vnd.apache.parquet' }],
        },
        status: 'success',
      });
      const download = await gw.http.request('GET', `/api/repos/${repo()}/file/main/train.parquet`, { token: alice.apiKey });
      expect(download.status).toBe(200);
      expect(download.headers['content-type']).toBe('application/vnd.apache.parquet');
      expect(download.headers['content-length']).toBe(String(content.length));
      expect(download.text).toBe(content.toString());
    });

    it('uploads several files[] into a directory and lists them in the description', async () => {
      const res = await uploadFiles(gw.http, alice.apiKey, repo(), 'main/data/v1', [
        { field: 'files[]', filename: 'a.txt', content: 'alpha', contentType: 'text/plain' },
        { field: 'files[]', filename: 'b.json', content: '{"b":1}' },
      ]);
      expect(res.status).toBe(201);
      const commit = (res.body as { commit: { id: string; message: string; files: { path: string }[] } }).commit;
      expect(commit.files.map((f) => f.path)).toEqual(['data/v1/a.txt', 'data/v1/b.json']);
      expect(commit.message).toBe('Upload 2 files');

      const described = await gw.http.request('GET', `/api/repos/${repo()}`, { token: alice.apiKey });
      expect(described.status).toBe(200);
      expect(described.body).toMatchObject({
        repository: {
          name: 'files-repo',
          branches: [{ name: 'main', head_commit_id: commit.id }],
          files: [
            { path: 'data/v1/a.txt', size: 5, content_type: 'text/plain', commit_id: commit.id },
            { path: 'data/v1/b.json', size: 7, content_type: 'application/json' },
            { path: 'train.parquet' },
          ],
        },
      });
      const b = await gw.http.request('GET', `/api/repos/${repo()}/file/main/data/v1/b.json`, { token: alice.apiKey });
      expect(b.text).toBe('{"b":1}');
    });

    it('replaces a file on re-upload and removes the blob nobody references any more', async () => {
      await uploadFiles(gw.http, alice.apiKey, repo(), 'main/replace', [{ filename: 'x.txt', content: 'old' }]);
      const before = countFiles(storageDir);
      const res = await uploadFiles(gw.http, alice.apiKey, repo(), 'main/replace', [{ filename: 'x.txt', content: 'new content' }]);
      expect(res.status).toBe(201);
      expect((await gw.http.request('GET', `/api/repos/${repo()}/file/main/replace/x.txt`, { token: alice.apiKey })).text).toBe('new content');
      expect(countFiles(storageDir)).toBe(before);
    });

    it('keeps branches apart: a new branch starts with main files, uploads to it leave main alone', async () => {
      const created = await gw.http.request('POST', `/api/repos/${repo()}/branches`, { token: alice.apiKey, body: { name: 'experiment' } });
      expect(created.status).toBe(201);
      expect((await gw.http.request('GET', `/api/repos/${repo()}/file/experiment/train.parquet`, { token: alice.apiKey })).status).toBe(200);
      await uploadFiles(gw.http, alice.apiKey, repo(), 'experiment', [{ filename: 'only-here.txt', content: 'x' }]);
      expect((await gw.http.request('GET', `/api/repos/${repo()}/file/experiment/only-here.txt`, { token: alice.apiKey })).status).toBe(200);
      const onMain = await gw.http.request('GET', `/api/repos/${repo()}/file/main/only-here.txt`, { token: alice.apiKey });
      expect(onMain.status).toBe(404);
      expect(onMain.body).toMatchObject({ status: 'error', error: { type: 'resource_not_found', message: expect.stringMatching(/File not found: only-here\.txt/) } });
      const branches = await gw.http.request('GET', `/api/repos/${repo()}/branches`, { token: alice.apiKey });
      expect((branches.body as { branches: { name: string }[] }).branches.map((b) => b.name)).toEqual(['main', 'experiment']);
      expect((await gw.http.request('POST', `/api/repos/${repo()}/branches`, { token: alice.apiKey, body: { name: 'experiment' } })).status).toBe(409);
    });

    it('answers unknown repositories, branches and files with 404', async () => {
      const noRepo = await gw.http.request('GET', `/api/repos/${alice.namespace}/nope`, { token: alice.apiKey });
      expect(noRepo.status).toBe(404);
      expect(noRepo.body).toMatchObject({ error: { message: `Repository not found: ${alice.namespace}/nope` } });
      const noBranch = await uploadFiles(gw.http, alice.apiKey, repo(), 'dev', [{ filename: 'a.txt', content: 'a' }]);
      expect(noBranch.status).toBe(404);
      expect(noBranch.body).toMatchObject({ error: { message: expect.stringMatching(/Branch not found: dev/) } });
      expect((await gw.http.request('GET', `/api/repos/${repo()}/file/main/missing.bin`, { token: alice.apiKey })).status).toBe(404);
    });

    it('refuses other tenants with 403 for describe, upload and download', async () => {
      expect((await gw.http.request('GET', `/api/repos/${repo()}`, { token: bob.apiKey })).status).toBe(403);
      expect((await gw.http.request('GET', `/api/repos/${repo()}/file/main/train.parquet`, { token: bob.apiKey })).status).toBe(403);
      const upload = await uploadFiles(gw.http, bob.apiKey, repo(), 'main', [{ filename: 'evil.txt', content: 'x' }]);
      expect(upload.status).toBe(403);
      expect((await gw.http.request('GET', `/api/repos/${repo()}`))).toMatchObject({ status: 401 });
    });

    it('answers a file over the size limit with 413 and records nothing', async () => {
      const before = countFiles(storageDir);
      const res = await uploadFiles(gw.http, alice.apiKey, repo(), 'main', [
        { filename: 'small.txt', content: 'fits' },
        { filename: 'big.bin', content: Buffer.alloc(10_000, 1) },
      ]);
      expect(res.status).toBe(413);
      expect(res.body).toMatchObject({ status: 'error', error: { type: 'payload_too_large', message: expect.stringMatching(/larger than the upload limit/) } });
      expect((await gw.http.request('GET', `/api/repos/${repo()}/file/main/small.txt`, { token: alice.apiKey })).status).toBe(404);
      expect(countFiles(storageDir)).toBe(before);
    });

    it('answers too many files with 413', async () => {
      const files = ['1', '2', '3', '4'].map((n) => ({ field: 'files[]', filename: `${n}.txt`, content: n }));
      const res = await uploadFiles(gw.http, alice.apiKey, repo(), 'main/many', files);
      expect(res.status).toBe(413);
      expect(res.body).toMatchObject({ error: { type: 'payload_too_large', message: 'An upload may carry at most 3 files' } });
    });

    it.each([
      ['no files', [], {}, /contains no files/],
      ['an unknown form field', [{ filename: 'a.txt', content: 'a' }], { author: 'me' }, /Unknown form field 'author'/],
      ['an unknown file field', [{ field: 'upload', filename: 'a.txt', content: 'a' }], {}, /Unknown file field 'upload'/],
      ['the same path twice', [{ field: 'files[]', filename: 'a.txt', content: 'a' }, { field: 'files[]', filename: 'a.txt', content: 'b' }], {}, /contains 'a.txt' twice/],
    ])('answers an upload with %s with 400', async (_label, files, fields, message) => {
      const res = await uploadFiles(gw.http, alice.apiKey, repo(), 'main', files, fields);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: { type: 'invalid_request', message: expect.stringMatching(message) } });
    });

    it('refuses path tricks and non-multipart uploads', async () => {
      const dots = await uploadFiles(gw.http, alice.apiKey, repo(), 'main/a%2F..%2Fb', [{ filename: 'a.txt', content: 'a' }]);
      expect(dots.status).toBe(400);
      expect(dots.body).toMatchObject({ error: { message: "The directory must not contain '.' or '..' segments" } });
      const dotName = await uploadFiles(gw.http, alice.apiKey, repo(), 'main', [{ filename: '..', content: 'a' }]);
      expect(dotName.status).toBe(400);
      const { body, contentType } = multipartBody([{ filename: 'a.txt', content: 'a' }]);
      const json = await gw.http.request('PUT', `/api/repos/${repo()}/file/main`, { token: alice.apiKey, body: { file: 'a' } });
      expect(json.status).toBe(415);
      expect(json.body).toMatchObject({ error: { type: 'unsupported_media_type' } });
      const broken = await gw.http.request('PUT', `/api/repos/${repo()}/file/main`, {
        token: alice.apiKey,
        rawBody: body.subarray(0, body.length - 20),
        headers: { 'content-type': contentType },
      });
      expect(broken.status).toBe(400);
    });
  });
});
