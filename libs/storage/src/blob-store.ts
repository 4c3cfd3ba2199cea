import type { Readable } from 'node:stream';

export interface StoredBlob {
  key: string;
  size: number;
  sha256: string;
  contentType: string;
}

export interface BlobObject {
  body: Readable;
  size: number;
  contentType: string;
}

/**
 * Where outputs and uploaded files live. Keys are relative, slash-separated paths starting
 * with the owning namespace (`<namespace>/...`). Large binaries go here; messages between
 * services carry keys, never bytes.
 */
export abstract class BlobStore {
  abstract put(key: string, data: Buffer | Readable, contentType: string): Promise<StoredBlob>;
  /** undefined when the key does not exist. */
  abstract get(key: string): Promise<BlobObject | undefined>;
  abstract head(key: string): Promise<{ size: number; contentType: string } | undefined>;
  abstract delete(key: string): Promise<void>;
  abstract ping(): Promise<void>;

  /**
   * Bytes [start, end) of a blob, for formats read piecewise (Parquet footers, row groups) so
   * large files never have to be held in memory. undefined when the key does not exist.
   * Stores override this with a real ranged read; this fallback streams up to `end`.
   */
  async readRange(key: string, start: number, end: number): Promise<Buffer | undefined> {
    const blob = await this.get(key);
    if (!blob) return undefined;
    const chunks: Buffer[] = [];
    let offset = 0;
    for await (const chunk of blob.body as AsyncIterable<Buffer>) {
      const from = Math.max(start - offset, 0);
      const to = Math.min(end - offset, chunk.length);
      if (to > from) chunks.push(chunk.subarray(from, to));
      offset += chunk.length;
      if (offset >= end) break;
    }
    blob.body.destroy();
    return Buffer.concat(chunks);
  }
}

const SAFE_SEGMENT = /^[A-Za-z0-9._@=+-][A-Za-z0-9._@=+ -]*$/;

/** Rejects keys that could escape the store (`..`, absolute paths, odd characters). */
export function assertSafeKey(key: string): void {
  const parts = key.split('/');
  if (!key || key.length > 1024 || parts.some((p) => !SAFE_SEGMENT.test(p) || p === '.' || p === '..'))
    throw new Error(`Invalid blob key: ${JSON.stringify(key)}`);
}
