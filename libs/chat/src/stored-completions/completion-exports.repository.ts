import { Injectable } from '@nestjs/common';
import { Prisma, PrismaService } from '@atelier/db';

export type ExportStatus = 'queued' | 'running' | 'completed' | 'failed';

export interface CompletionExportRow {
  id: string;
  namespaceId: string;
  namespace: string;
  userId: string;
  username: string;
  repo: string;
  path: string;
  branch: string;
  filter: Record<string, unknown>;
  status: ExportStatus;
  total: number;
  rows: number;
  skipped: number;
  commit: Record<string, unknown> | null;
  error: string | null;
  createdAt: Date;
  startedAt: Date | null;
  endedAt: Date | null;
  eventPublishedAt: Date | null;
}

const select = {
  id: true,
  namespaceId: true,
  namespace: { select: { name: true } },
  userId: true,
  username: true,
  repo: true,
  path: true,
  branch: true,
  filter: true,
  status: true,
  total: true,
  rows: true,
  skipped: true,
  commit: true,
  error: true,
  createdAt: true,
  startedAt: true,
  endedAt: true,
  eventPublishedAt: true,
} as const;

const fromRow = (r: { namespace: { name: string } } & Record<string, unknown>): CompletionExportRow => ({ ...r, namespace: r.namespace.name }) as unknown as CompletionExportRow;

/** Queued exports of stored completions (completion_exports). */
@Injectable()
export class CompletionExportsRepository {
  constructor(private readonly prisma: PrismaService) {}

  async create(e: Pick<CompletionExportRow, 'namespaceId' | 'userId' | 'username' | 'repo' | 'path' | 'branch' | 'filter' | 'total'>): Promise<CompletionExportRow> {
    return fromRow(await this.prisma.completionExport.create({ data: { ...e, filter: e.filter as Prisma.InputJsonValue, status: 'queued' }, select }));
  }

  async byId(id: string): Promise<CompletionExportRow | undefined> {
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id)) return undefined;
    const row = await this.prisma.completionExport.findUnique({ where: { id }, select });
    return row ? fromRow(row) : undefined;
  }

  /** Running from the start (a first run, or a retry after its gateway died): false once it ended. */
  async start(id: string): Promise<boolean> {
    const { count } = await this.prisma.completionExport.updateMany({ where: { id, status: { in: ['queued', 'running'] } }, data: { status: 'running', startedAt: new Date(), rows: 0, skipped: 0 } });
    return count === 1;
  }

  async progress(id: string, rows: number, skipped: number): Promise<void> {
    await this.prisma.completionExport.updateMany({ where: { id, status: 'running' }, data: { rows, skipped } });
  }

  async end(id: string, ending: { status: 'completed'; rows: number; skipped: number; commit: Record<string, unknown> } | { status: 'failed'; error: string }): Promise<void> {
    const data = ending.status === 'completed' ? { ...ending, commit: ending.commit as Prisma.InputJsonValue } : ending;
    await this.prisma.completionExport.updateMany({ where: { id, status: 'running' }, data: { ...data, endedAt: new Date() } });
  }

  async published(id: string): Promise<void> {
    await this.prisma.completionExport.update({ where: { id }, data: { eventPublishedAt: new Date() } });
  }
}
