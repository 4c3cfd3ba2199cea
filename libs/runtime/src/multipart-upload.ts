import { finished, PassThrough } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import type {} from '@fastify/multipart';
import type { AppConfig } from '@atelier/config';
import { ApiError } from '@atelier/contracts';
import type { UploadItem } from '@atelier/contracts';

/**
 * The parts of a multipart request as upload items, in arrival order, with the plugin's limit
 * and parse errors turned into 413/400 envelopes.
 */
export async function* multipartUploadItems(req: FastifyRequest, config: AppConfig, limit?: { maxFileBytes: number; name: string }): AsyncGenerator<UploadItem> {
  if (!req.isMultipart()) throw new ApiError('unsupported_media_type', 'Uploads must be sent as multipart/form-data');
  const fileTooLarge = limit ? `A file may be at most ${limit.maxFileBytes} bytes (${limit.name})` : `A file is larger than the upload limit of ${config.REPO_UPLOAD_MAX_FILE_BYTES} bytes`;
  const toError = (err: unknown, inPart = false) =>
    (err as { code?: string }).code === 'FST_REQ_FILE_TOO_LARGE' ? new ApiError('payload_too_large', fileTooLarge) : toUploadError(err, config, inPart);
  try {
    for await (const part of req.parts(limit ? { limits: { fileSize: limit.maxFileBytes } } : undefined)) {
      if (part.type === 'field') {
        yield { kind: 'field', name: part.fieldname, value: typeof part.value === 'string' ? part.value : JSON.stringify(part.value) };
      } else {
        const file = part.file;
        // Errors inside a part (cut-off body, limits) surface on its stream while it is being
        // stored; re-raise them as envelopes there too.
        const stream = new PassThrough();
        // The consumer attaches its own handlers (and sees the stored error) once it starts
        // reading; until then an error must not count as unhandled.
        stream.on('error', () => undefined);
        // `finished` also reports a stream that failed before this point.
        finished(file, (err) => {
          if (err) stream.destroy(toError(err, true) as Error);
        });
        file.pipe(stream);
        yield { kind: 'file', fieldname: part.fieldname, filename: part.filename, mimetype: part.mimetype, stream, truncated: () => file.truncated };
      }
    }
  } catch (err) {
    throw toError(err);
  }
}

/** `inPart`: the error broke a file part's stream, which only a malformed or cut-off body does. */
function toUploadError(err: unknown, config: AppConfig, inPart = false): unknown {
  if (err instanceof ApiError) return err;
  const e = err as { code?: string; statusCode?: number; message?: string };
  switch (e.code) {
    case 'FST_FILES_LIMIT':
      return new ApiError('payload_too_large', `An upload may carry at most ${config.REPO_UPLOAD_MAX_FILES} files`);
    case 'FST_PARTS_LIMIT':
    case 'FST_FIELDS_LIMIT':
      return new ApiError('payload_too_large', 'The upload has too many form parts');
  }
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500)
    return ApiError.badRequest(`Malformed multipart body: ${e.message ?? 'unreadable'}`);
  if (inPart || (typeof e.message === 'string' && /multipart|boundary/i.test(e.message))) return ApiError.badRequest(`Malformed multipart body: ${e.message}`);
  return err;
}
