import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { BlobStore, type BlobObject, type StoredBlob } from './blob-store';
import { LocalBlobStore } from './local-blob-store';

/** Only get(): exercises the streaming fallback of readRange. */
class StreamOnlyStore extends BlobStore {
  constructor(private readonly data: Buffer) {
    super();
  }
  async get(): Promise<BlobObject> {
    // Small chunks so ranges cross chunk boundaries.
    const chunks = Array.from({ length: Math.ceil(this.data.length / 7) }, (_, i) => this.data.subarray(i * 7, i * 7 + 7));
    return { body: Readable.from(chunks), size: this.data.length, contentType: 'application/octet-stream' };
  }
  async put(): Promise<StoredBlob> {
    throw new Error('unused');
  }
  async head() {
    return undefined;
  }
  async delete() {}
  async ping() {}
}

describe('BlobStore.readRange', () => {
  const data = Buffer.from(Array.from({ length: 1000 }, (_, i) => i % 251));

  it('reads exact byte ranges from the local store, and undefined for a missing key', async () => {
    const store = new LocalBlobStore(mkdtempSync(path.join(tmpdir(), 'atelier-range-')));
    await store.put('ns/a.bin', data, 'application/octet-stream');
    expect(await store.readRange('ns/a.bin', 0, 4)).toEqual(data.subarray(0, 4));
    expect(await store.readRange('ns/a.bin', 990, 1000)).toEqual(data.subarray(990));
    expect(await store.readRange('ns/a.bin', 995, 1010)).toEqual(data.subarray(995));
    expect(await store.readRange('ns/missing.bin', 0, 4)).toBeUndefined();
  });

  it('falls back to streaming for stores without ranged reads', async () => {
    const store = new StreamOnlyStore(data);
    expect(await store.readRange('k', 5, 30)).toEqual(data.subarray(5, 30));
    expect(await store.readRange('k', 990, 1000)).toEqual(data.subarray(990));
  });
});
