import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { assertSafeKey, BlobStore, type BlobObject, type StoredBlob } from './blob-store';

export interface S3Settings {
  endpoint?: string;
  region: string;
  bucket: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  forcePathStyle: boolean;
}

/** S3-compatible storage (AWS S3, MinIO, R2, ...). */
export class S3BlobStore extends BlobStore {
  private readonly client: S3Client;

  constructor(private readonly settings: S3Settings) {
    super();
    this.client = new S3Client({
      region: settings.region,
      endpoint: settings.endpoint,
      forcePathStyle: settings.forcePathStyle,
      credentials:
        settings.accessKeyId && settings.secretAccessKey
          ? { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey }
          : undefined,
    });
  }

  async put(key: string, data: Buffer | Readable, contentType: string): Promise<StoredBlob> {
    assertSafeKey(key);
    // S3 needs the length up front; outputs and uploads are bounded, so buffering is acceptable.
    const body = Buffer.isBuffer(data) ? data : Buffer.concat(await Array.fromAsync(data as AsyncIterable<Buffer>));
    await this.client.send(new PutObjectCommand({ Bucket: this.settings.bucket, Key: key, Body: body, ContentType: contentType }));
    return { key, size: body.length, sha256: createHash('sha256').update(body).digest('hex'), contentType };
  }

  async head(key: string): Promise<{ size: number; contentType: string } | undefined> {
    assertSafeKey(key);
    try {
      const r = await this.client.send(new HeadObjectCommand({ Bucket: this.settings.bucket, Key: key }));
      return { size: r.ContentLength ?? 0, contentType: r.ContentType ?? 'application/octet-stream' };
    } catch (err) {
      if ((err as { name?: string }).name === 'NotFound') return undefined;
      throw err;
    }
  }

  async get(key: string): Promise<BlobObject | undefined> {
    assertSafeKey(key);
    try {
      const r = await this.client.send(new GetObjectCommand({ Bucket: this.settings.bucket, Key: key }));
      return {
        body: r.Body as Readable,
        size: r.ContentLength ?? 0,
        contentType: r.ContentType ?? 'application/octet-stream',
      };
    } catch (err) {
      if ((err as { name?: string }).name === 'NoSuchKey') return undefined;
      throw err;
    }
  }

  override async readRange(key: string, start: number, end: number): Promise<Buffer | undefined> {
    assertSafeKey(key);
    if (end <= start) return Buffer.alloc(0);
    try {
      const r = await this.client.send(
        new GetObjectCommand({ Bucket: this.settings.bucket, Key: key, Range: `bytes=${start}-${end - 1}` }),
      );
      return Buffer.from(await r.Body!.transformToByteArray());
    } catch (err) {
      if ((err as { name?: string }).name === 'NoSuchKey') return undefined;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    assertSafeKey(key);
    await this.client.send(new DeleteObjectCommand({ Bucket: this.settings.bucket, Key: key }));
  }

  async ping(): Promise<void> {
    await this.client.send(new HeadBucketCommand({ Bucket: this.settings.bucket }));
  }
}
