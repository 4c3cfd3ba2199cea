import type { Readable } from 'node:stream';

/** One part of a multipart upload, in arrival order; a file's stream must be consumed before the next part. */
export type UploadItem =
  | { kind: 'field'; name: string; value: string }
  | {
      kind: 'file';
      fieldname: string;
      filename: string;
      mimetype: string | undefined;
      stream: Readable;
      /** True once the stream was cut at the size limit. */
      truncated(): boolean;
    };
