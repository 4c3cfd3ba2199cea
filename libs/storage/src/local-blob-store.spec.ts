import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { LocalBlobStore } from './local-blob-store';

const read = async (store: LocalBlobStore, key: string) => {
  const blob = await store.get(key);
  if (!blob) return undefined;
  const chunks: Buffer[] = [];
  for await (const chunk of blob.body) chunks.push(chunk as Buffer);
  return { data: Buffer.concat(chunks), contentType: blob.contentType, size: blob.size };
};

/** Every file under `dir`, relative to it. */
const filesUnder = (dir: string): string[] => readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => path.relative(dir, path.join(e.parentPath, e.name)));

describe('LocalBlobStore', () => {
  let root: string;
  let store: LocalBlobStore;
  beforeEach(() => {
    root = mkdtempSync(path.join(tmpdir(), 'atelier-blobs-'));
    store = new LocalBlobStore(root);
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('stores outputs that arrive whole, small and large, with their content type and no temp file left', async () => {
    const small = Buffer.from('a tiny png');
    const large = Buffer.alloc(3 * 1024 * 1024, 7);
    const [a, b] = await Promise.all([store.put('ns/2026/11/a.png', small, 'image/png'), store.put('ns/2026/11/b.mp4', large, 'video/mp4')]);
    expect(a).toMatchObject({ key: 'ns/2026/11/a.png', size: small.length, contentType: 'image/png' });
    expect(b.size).toBe(large.length);
    expect(await read(store, 'ns/2026/11/a.png')).toEqual({ data: small, contentType: 'image/png', size: small.length });
    expect((await read(store, 'ns/2026/11/b.mp4'))?.data.equals(large)).toBe(true);
    expect(filesUnder(root).sort()).toEqual(['blobs/ns/2026/11/a.png', 'blobs/ns/2026/11/a.png.meta', 'blobs/ns/2026/11/b.mp4', 'blobs/ns/2026/11/b.mp4.meta']);
  });

  it('still stores an output after the directory it last wrote to was removed', async () => {
    await store.put('ns/day/first.png', Buffer.from('one'), 'image/png');
    rmSync(path.join(root, 'blobs', 'ns'), { recursive: true });
    await store.put('ns/day/second.png', Buffer.from('two'), 'image/png');
    await store.put('ns/day/third.bin', Buffer.alloc(2 * 1024 * 1024, 1), 'application/octet-stream');
    expect((await read(store, 'ns/day/second.png'))?.data.toString()).toBe('two');
    expect((await read(store, 'ns/day/third.bin'))?.size).toBe(2 * 1024 * 1024);
  });

  it('refuses a write it cannot finish and leaves no temp file behind', async () => {
    // A directory where the file would go: the rename into place fails.
    mkdirSync(path.join(root, 'blobs', 'ns', 'taken.png'), { recursive: true });
    await expect(store.put('ns/taken.png', Buffer.from('x'), 'image/png')).rejects.toThrow();
    expect(filesUnder(root).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  it('stores an upload as it streams in, with its size and hash', async () => {
    const parts = [Buffer.from('hello '), Buffer.from('world')];
    const stored = await store.put('repo/data.jsonl', Readable.from(parts), 'application/jsonl');
    expect(stored).toMatchObject({ size: 11, sha256: 'b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9' });
    expect((await read(store, 'repo/data.jsonl'))?.data.toString()).toBe('hello world');
  });
});
