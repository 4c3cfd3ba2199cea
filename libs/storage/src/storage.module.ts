import { SpanKind, tracing } from '@atelier/observability';
import path from 'node:path';
import { Global, Module } from '@nestjs/common';
import { APP_CONFIG, DEV_URL_SIGNING_SECRET, type AppConfig } from '@atelier/config';
import { BlobStore } from './blob-store';
import { LocalBlobStore } from './local-blob-store';
import { S3BlobStore } from './s3-blob-store';
import { SignedUrls } from './signed-urls';

export function createBlobStore(config: AppConfig): BlobStore {
  return tracedWrites(untracedBlobStore(config));
}

/**
 * With tracing on, each write is a span of the work that made it (its key names the namespace,
 * never a signed URL); off, the store as it is.
 */
function tracedWrites(store: BlobStore): BlobStore {
  if (!tracing.on) return store;
  const put = store.put.bind(store);
  store.put = async (key, data, contentType) => {
    const span = tracing.startSpan('blob.put', { kind: SpanKind.CLIENT, attributes: { 'atelier.blob.key': key, 'atelier.blob.content_type': contentType } });
    try {
      const stored = await put(key, data, contentType);
      span?.setAttribute('atelier.blob.size', stored.size);
      return stored;
    } catch (err) {
      tracing.failed(err, span, 'service_unavailable');
      throw err;
    } finally {
      span?.end();
    }
  };
  return store;
}

function untracedBlobStore(config: AppConfig): BlobStore {
  if (config.STORAGE_DRIVER === 's3')
    return new S3BlobStore({
      endpoint: config.S3_ENDPOINT,
      region: config.S3_REGION,
      bucket: config.S3_BUCKET,
      accessKeyId: config.S3_ACCESS_KEY_ID,
      secretAccessKey: config.S3_SECRET_ACCESS_KEY,
      forcePathStyle: config.S3_FORCE_PATH_STYLE,
    });
  return new LocalBlobStore(path.resolve(config.STORAGE_DIR));
}

export function createSignedUrls(config: AppConfig): SignedUrls {
  return new SignedUrls(
    config.URL_SIGNING_SECRET ?? DEV_URL_SIGNING_SECRET,
    config.PUBLIC_URL ?? `http://localhost:${config.PORT}`,
    config.RESULT_URL_TTL_SECONDS,
  );
}

@Global()
@Module({
  providers: [
    { provide: BlobStore, inject: [APP_CONFIG], useFactory: createBlobStore },
    { provide: SignedUrls, inject: [APP_CONFIG], useFactory: createSignedUrls },
  ],
  exports: [BlobStore, SignedUrls],
})
export class StorageModule {}
