import { Injectable } from '@nestjs/common';
import { Prisma, PrismaService, type StoredFileModel } from '@atelier/db';

/** The files table: uploaded files' records (their bytes are in the blob store), one namespace's own. */
@Injectable()
export class FilesRepository {
  constructor(private readonly prisma: PrismaService) {}

  /** In the caller's transaction when given one (a batch's output files and its end are written together). */
  create(file: { id: string; namespaceId: string; userId: string; filename: string; purpose: string; bytes: number; sha256: string; blobKey: string; expiresAt: Date | null }, tx: Prisma.TransactionClient = this.prisma): Promise<StoredFileModel> {
    return tx.storedFile.create({ data: { ...file, bytes: BigInt(file.bytes) } });
  }

  /** The namespace's file with this id, unless it expired. */
  find(namespaceId: string, id: string, now = new Date()): Promise<StoredFileModel | null> {
    return this.prisma.storedFile.findFirst({ where: { id, namespaceId, OR: [{ expiresAt: null }, { expiresAt: { gt: now } }] } });
  }

  /** A page of the namespace's live files, in created order (`desc`: newest first), after the file `after`. */
  async page(namespaceId: string, query: { purpose?: string; limit: number; order: 'asc' | 'desc'; after?: { id: string; createdAt: Date } }, now = new Date()): Promise<StoredFileModel[]> {
    const direction = query.order;
    const cursor = query.after;
    return this.prisma.storedFile.findMany({
      where: {
        namespaceId,
        ...(query.purpose && { purpose: query.purpose }),
        AND: [
          { OR: [{ expiresAt: null }, { expiresAt: { gt: now } }] },
          ...(cursor
            ? [
                direction === 'desc'
                  ? { OR: [{ createdAt: { lt: cursor.createdAt } }, { createdAt: cursor.createdAt, id: { lt: cursor.id } }] }
                  : { OR: [{ createdAt: { gt: cursor.createdAt } }, { createdAt: cursor.createdAt, id: { gt: cursor.id } }] },
              ]
            : []),
        ],
      },
      orderBy: [{ createdAt: direction }, { id: direction }],
      take: query.limit + 1,
    });
  }

  /**
   * Deletes up to `limit` expired files' records and returns their blob keys. DELETE ... RETURNING: of
   * replicas sweeping at once, each record's bytes are one sweeper's to delete.
   */
  async deleteExpired(limit: number, now = new Date()): Promise<string[]> {
    const rows = await this.prisma.$queryRaw<{ blob_key: string }[]>`
      DELETE FROM files WHERE id IN (SELECT id FROM files WHERE expires_at <= ${now} ORDER BY expires_at LIMIT ${limit} FOR UPDATE SKIP LOCKED)
      RETURNING blob_key`;
    return rows.map((r) => r.blob_key);
  }

  /** Deletes the namespace's file; the deleted record (its blob is the caller's to remove), or undefined. */
  async delete(namespaceId: string, id: string): Promise<StoredFileModel | undefined> {
    const rows = await this.prisma.storedFile.findMany({ where: { id, namespaceId }, take: 1 });
    if (rows.length === 0) return undefined;
    const { count } = await this.prisma.storedFile.deleteMany({ where: { id, namespaceId } });
    return count > 0 ? rows[0] : undefined;
  }
}
