import { Inject, Injectable, Logger } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ApiError, FILE_PURPOSES, type FileObject, type UploadItem } from '@atelier/contracts';
import type { StoredFileModel } from '@atelier/db';
import { uuidV7 } from '@atelier/random';
import { errorSummary } from '@atelier/runtime';
import { BlobStore, type BlobObject } from '@atelier/storage';
import { FilesRepository } from './files.repository';

const fieldError = (field: string, message: string) => ApiError.badRequest(message, { fields: [{ field, message }] });
const unix = (d: Date) => Math.floor(d.getTime() / 1000);

/** `file-` and the row's uuid without dashes: OpenAI's id shape. */
export const fileId = (uuid: string) => `file-${uuid.replace(/-/g, '')}`;
/** The row's uuid of a `file-...` id; undefined for anything that cannot be one. */
export function fileUuid(id: string): string | undefined {
  const hex = /^file-([0-9a-f]{32})$/.exec(id)?.[1];
  return hex && `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export function fileObject(row: StoredFileModel): FileObject {
  return {
    id: fileId(row.id),
    object: 'file',
    bytes: Number(row.bytes),
    created_at: unix(row.createdAt),
    filename: row.filename,
    purpose: row.purpose as FileObject['purpose'],
    expires_at: row.expiresAt ? unix(row.expiresAt) : null,
    status: 'processed',
    status_details: null,
  };
}

/** OpenAI's 404 text, the same for a file that never was, expired, or is another namespace's. */
const notFound = (id: string) => ApiError.notFound(`No such File object: ${id}`);

/**
 * OpenAI's Files API for batches: a namespace's uploads, streamed into the blob store (a 200 MB
 * file never sits in memory) and out again, listed, and deleted. Another namespace's file is a
 * 404 like one that never existed.
 */
@Injectable()
export class FilesService {
  private readonly logger = new Logger(FilesService.name);

  constructor(
    private readonly files: FilesRepository,
    private readonly blobs: BlobStore,
    @Inject(APP_CONFIG) private readonly config: Pick<AppConfig, 'FILES_TTL_DAYS'>,
  ) {}

  /**
   * POST /api/ai/files: `file`, `purpose` (batch or user_data) and optionally
   * `expires_after[anchor]=created_at` with `expires_after[seconds]` (1 hour to 30 days), in any
   * order. The file is stored while it arrives; a refusal after it (a bad purpose, too large)
   * removes it again, so nothing is kept.
   */
  async upload(owner: { namespaceId: string; namespace: string; userId: string }, parts: AsyncIterable<UploadItem>): Promise<FileObject> {
    const id = uuidV7();
    const fields: Record<string, string> = {};
    let stored: { filename: string; key: string; size: number; sha256: string } | undefined;
    try {
      for await (const part of parts) {
        if (part.kind === 'field') {
          fields[part.name] = part.value;
          continue;
        }
        if (part.fieldname !== 'file' || stored) {
          part.stream.resume();
          throw fieldError(part.fieldname, stored ? 'Send one file per upload' : `${part.fieldname}: the file goes in the form field 'file'`);
        }
        // The multipart parser bounds the part at FILES_MAX_BYTES (the controller's limit): past it the store gets an error, not the rest.
        const blob = await this.blobs.put(`${owner.namespace}/files/${id}`, part.stream, 'application/octet-stream');
        stored = { filename: part.filename || 'upload', key: blob.key, size: blob.size, sha256: blob.sha256 };
      }
      if (!stored) throw fieldError('file', "file is required: send the file's bytes as the multipart field 'file'");
      const purpose = fields.purpose;
      if (!(FILE_PURPOSES as readonly string[]).includes(purpose ?? ''))
        throw fieldError('purpose', purpose === undefined ? `purpose is required: one of ${FILE_PURPOSES.join(', ')}` : `purpose must be one of ${FILE_PURPOSES.join(', ')} (got '${purpose}')`);
      const row = await this.files.create({
        id,
        namespaceId: owner.namespaceId,
        userId: owner.userId,
        filename: stored.filename.slice(0, 512),
        purpose,
        bytes: stored.size,
        sha256: stored.sha256,
        blobKey: stored.key,
        expiresAt: this.expiry(fields),
      });
      return fileObject(row);
    } catch (err) {
      if (stored) await this.blobs.delete(stored.key).catch((e: unknown) => this.logger.warn(`Removing refused upload ${stored?.key} failed: ${errorSummary(e)}`));
      throw err;
    }
  }

  /** `expires_after[anchor]` (created_at only) and `expires_after[seconds]`, or FILES_TTL_DAYS from now. */
  private expiry(fields: Record<string, string>): Date {
    const anchor = fields['expires_after[anchor]'];
    const seconds = fields['expires_after[seconds]'];
    if (anchor === undefined && seconds === undefined) return new Date(Date.now() + this.config.FILES_TTL_DAYS * 86_400_000);
    if (anchor !== 'created_at') throw fieldError('expires_after[anchor]', "expires_after[anchor] must be 'created_at'");
    const n = Number(seconds);
    if (!/^\d+$/.test(seconds ?? '') || n < 3600 || n > 2_592_000) throw fieldError('expires_after[seconds]', 'expires_after[seconds] must be an integer from 3600 (1 hour) to 2592000 (30 days)');
    return new Date(Date.now() + n * 1000);
  }

  private async row(namespaceId: string, id: string): Promise<StoredFileModel> {
    const uuid = fileUuid(id);
    const row = uuid ? await this.files.find(namespaceId, uuid) : null;
    if (!row) throw notFound(id);
    return row;
  }

  async get(namespaceId: string, id: string): Promise<FileObject> {
    return fileObject(await this.row(namespaceId, id));
  }

  /** The file's bytes, streamed from the blob store. */
  async content(namespaceId: string, id: string): Promise<{ file: FileObject; blob: BlobObject }> {
    const row = await this.row(namespaceId, id);
    const blob = await this.blobs.get(row.blobKey);
    if (!blob) throw new ApiError('service_unavailable', `The stored content of ${id} cannot be read now; try again`);
    return { file: fileObject(row), blob };
  }

  /** GET /api/ai/files: `purpose`, `limit` (1-10,000, default 10,000 as OpenAI's), `order` (desc), `after` (a file id). */
  async list(namespaceId: string, query: Record<string, unknown>): Promise<{ object: 'list'; data: FileObject[]; first_id: string | null; last_id: string | null; has_more: boolean }> {
    const limit = query.limit === undefined ? 10_000 : Number(query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw fieldError('limit', 'limit must be an integer between 1 and 10000');
    const order = query.order ?? 'desc';
    if (order !== 'asc' && order !== 'desc') throw fieldError('order', 'order must be asc or desc');
    if (query.purpose !== undefined && !(FILE_PURPOSES as readonly unknown[]).includes(query.purpose)) throw fieldError('purpose', `purpose must be one of ${FILE_PURPOSES.join(', ')}`);
    let after: { id: string; createdAt: Date } | undefined;
    if (query.after !== undefined) {
      if (typeof query.after !== 'string') throw fieldError('after', 'after must be a file id');
      const row = await this.row(namespaceId, query.after).catch(() => undefined);
      if (!row) throw fieldError('after', `after: no file '${query.after}'`);
      after = { id: row.id, createdAt: row.createdAt };
    }
    const rows = await this.files.page(namespaceId, { purpose: query.purpose as string | undefined, limit, order, after });
    const data = rows.slice(0, limit).map(fileObject);
    return { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: rows.length > limit };
  }

  /** DELETE: the record first (the file is gone for every reader at once), then its bytes. */
  async delete(namespaceId: string, id: string): Promise<{ id: string; object: 'file'; deleted: true }> {
    const uuid = fileUuid(id);
    const row = uuid ? await this.files.delete(namespaceId, uuid) : undefined;
    if (!row) throw notFound(id);
    await this.blobs.delete(row.blobKey).catch((err: unknown) => this.logger.warn(`Deleting the bytes of ${id} failed (${errorSummary(err)}); the record is gone`));
    return { id, object: 'file', deleted: true };
  }
}
