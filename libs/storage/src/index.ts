export { BlobStore, assertSafeKey, type BlobObject, type StoredBlob } from './blob-store';
export { LocalBlobStore } from './local-blob-store';
export { S3BlobStore, type S3Settings } from './s3-blob-store';
export { SignedUrls } from './signed-urls';
export { StorageModule, createBlobStore, createSignedUrls } from './storage.module';
export { outputKey, directorySegments, type OutputLocation } from './output-keys';
export { ParsedBlobs } from './parsed-blobs';
