import { ApiError } from '@atelier/contracts';
import type { BlobStore } from './blob-store';

/**
 * Small files read once and kept parsed, most recently used kept longest: a deployed fine-tune's
 * adapter (counts, a learned style), loaded by the service that serves it on its first request.
 */
export class ParsedBlobs<T> {
  private readonly loaded = new Map<string, Promise<T>>();

  constructor(
    private readonly blobs: BlobStore,
    private readonly parse: (text: string) => T,
    private readonly max: number,
  ) {}

  get(key: string): Promise<T> {
    let value = this.loaded.get(key);
    if (value) {
      this.loaded.delete(key);
      this.loaded.set(key, value);
      return value;
    }
    value = this.load(key);
    // A failed load is tried again next time.
    value.catch(() => this.loaded.delete(key));
    this.loaded.set(key, value);
    for (const old of this.loaded.keys()) {
      if (this.loaded.size <= this.max) break;
      this.loaded.delete(old);
    }
    return value;
  }

  private async load(key: string): Promise<T> {
    const blob = await this.blobs.get(key);
    if (!blob) throw new ApiError('service_unavailable', 'The fine-tuned model files are missing from storage');
    const chunks: Buffer[] = [];
    for await (const chunk of blob.body as AsyncIterable<Buffer>) chunks.push(chunk);
    return this.parse(Buffer.concat(chunks).toString('utf8'));
  }
}
