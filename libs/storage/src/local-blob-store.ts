import { createHash, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createWriteStream } from 'node:fs';
import { assertSafeKey, BlobStore, type BlobObject, type StoredBlob } from './blob-store';

/**
 * Blobs as files under one directory, content type in a sidecar file. Writes go to a temp
 * file and are renamed into place, so readers never see half-written blobs.
 */
export class LocalBlobStore extends BlobStore {
  constructor(private readonly root: string) {
    super();
  }

  private file(key: string): string {
    assertSafeKey(key);
    return path.join(this.root, 'blobs', ...key.split('/'));
  }

  async put(key: string, data: Buffer | Readable, contentType: string): Promise<StoredBlob> {
    const target = this.file(key);
    await mkdir(path.dirname(target), { recursive: true });
    const tmp = `${target}.${randomUUID()}.tmp`;
    if (Buffer.isBuffer(data)) {
      // Generated outputs arrive whole: write file and sidecar concurrently (on the synchronous
      // media path every millisecond of storage is latency the caller waits for).
      try {
        await Promise.all([writeFile(tmp, data), writeFile(`${target}.meta`, JSON.stringify({ contentType }))]);
        await rename(tmp, target);
      } catch (err) {
        await rm(tmp, { force: true });
        throw err;
      }
      return { key, size: data.length, sha256: createHash('sha256').update(data).digest('hex'), contentType };
    }
    const hash = createHash('sha256');
    let size = 0;
    const source = Buffer.isBuffer(data) ? Readable.from([data]) : data;
    try {
      await pipeline(
        source,
        async function* (chunks: AsyncIterable<Buffer>) {
          for await (const chunk of chunks) {
            hash.update(chunk);
            size += chunk.length;
            yield chunk;
          }
        },
        createWriteStream(tmp),
      );
      await writeFile(`${target}.meta`, JSON.stringify({ contentType }));
      await rename(tmp, target);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
    return { key, size, sha256: hash.digest('hex'), contentType };
  }

  async head(key: string): Promise<{ size: number; contentType: string } | undefined> {
    const file = this.file(key);
    try {
      const [info, meta] = await Promise.all([stat(file), readFile(`${file}.meta`, 'utf8').catch(() => '{}')]);
      if (!info.isFile()) return undefined;
      const contentType = (JSON.parse(meta) as { contentType?: string }).contentType ?? 'application/octet-stream';
      return { size: info.size, contentType };
    } catch {
      return undefined;
    }
  }

  async get(key: string): Promise<BlobObject | undefined> {
    const info = await this.head(key);
    if (!info) return undefined;
    return { ...info, body: createReadStream(this.file(key)) };
  }

  override async readRange(key: string, start: number, end: number): Promise<Buffer | undefined> {
    let handle;
    try {
      handle = await open(this.file(key), 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
    try {
      const buffer = Buffer.allocUnsafe(Math.max(end - start, 0));
      let filled = 0;
      while (filled < buffer.length) {
        const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, start + filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      return buffer.subarray(0, filled);
    } finally {
      await handle.close();
    }
  }

  async delete(key: string): Promise<void> {
    const file = this.file(key);
    await Promise.all([rm(file, { force: true }), rm(`${file}.meta`, { force: true })]);
  }

  async ping(): Promise<void> {
    await mkdir(path.join(this.root, 'blobs'), { recursive: true });
  }
}
