import { Injectable } from '@nestjs/common';
import { NamespaceAccess, type Caller } from '@atelier/auth';
import { ApiError, GENERATION_STATUSES, UUID_PATTERN } from '@atelier/contracts';
import type { GenerationModel } from '@atelier/db';
import { SignedUrls } from '@atelier/storage';
import { GenerationProgress } from './generation-progress';
import { toGenerationRecord, type GenerationRecord, type LiveFields } from './generation-record';
import { GenerationsRepository, type GenerationRead } from './generations.repository';
import { optionalText } from './query-text';
import { QueuePositions } from './queue-positions';

export const MAX_PAGE_SIZE = 100;
/** Far past any real listing; beyond it Postgres's OFFSET overflows (a 500 before). */
const MAX_OFFSET = 1_000_000;

export interface ListQuery {
  namespace?: unknown;
  model?: unknown;
  status?: unknown;
  media_type?: unknown;
  repo?: unknown;
  folder?: unknown;
  limit?: unknown;
  offset?: unknown;
}

const notFound = () => new ApiError('resource_not_found', 'Generation not found');

/** GET /api/ai/queue/:id and GET /api/ai/queue: the records, with their live place and progress from Redis. */
@Injectable()
export class ReadGenerations {
  constructor(
    private readonly generations: GenerationsRepository,
    private readonly access: NamespaceAccess,
    private readonly urls: SignedUrls,
    private readonly positions: QueuePositions,
    private readonly progress: GenerationProgress,
  ) {}

  /** The generation if the caller may see it; unknown, malformed and foreign ids all look the same (404). */
  async findVisible(caller: Caller, id: string): Promise<GenerationRead> {
    if (!UUID_PATTERN.test(id)) throw notFound();
    const row = await this.generations.read(id);
    if (!row || !(await this.access.canAccess(caller, row.namespaceId))) throw notFound();
    return row;
  }

  async get(caller: Caller, id: string): Promise<GenerationRecord> {
    const row = await this.findVisible(caller, id);
    const live = await this.liveFields([row]);
    return toGenerationRecord(row, row.namespace, (key) => this.urls.url(key), live.get(row.id));
  }

  async list(caller: Caller, query: ListQuery): Promise<{ count: number; generations: GenerationRecord[]; limit: number; offset: number }> {
    const scope = await this.access.resolve(caller, query.namespace);
    // One status, several separated by commas (a gallery of everything is one request), or `all`.
    const given = optionalText(query.status, 'status');
    const status = given === 'all' ? GENERATION_STATUSES.join(',') : given;
    if (status !== undefined && !status.split(',').every((one) => (GENERATION_STATUSES as readonly string[]).includes(one)))
      throw ApiError.badRequest(`status must be one of ${GENERATION_STATUSES.join(', ')}, several of them separated by commas, or all`);
    const mediaType = optionalText(query.media_type, 'media_type');
    if (mediaType && mediaType !== 'image' && mediaType !== 'video') throw ApiError.badRequest('media_type must be image or video');
    const limit = query.limit === undefined ? 50 : Number(query.limit);
    const offset = query.offset === undefined ? 0 : Number(query.offset);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE)
      throw ApiError.badRequest(`limit must be an integer between 1 and ${MAX_PAGE_SIZE}`);
    if (!Number.isInteger(offset) || offset < 0 || offset > MAX_OFFSET) throw ApiError.badRequest(`offset must be an integer between 0 and ${MAX_OFFSET}`);
    const filters = { status, mediaType, model: optionalText(query.model, 'model'), repo: optionalText(query.repo, 'repo'), folder: optionalText(query.folder, 'folder') };
    const { count, rows } = await this.generations.list(scope.id, filters, limit, offset);
    const live = await this.liveFields(rows);
    return { count, generations: rows.map((r) => toGenerationRecord(r, scope.name, (key) => this.urls.url(key), live.get(r.id))), limit, offset };
  }

  /** queue_position of the queued rows (one ZRANK each, pipelined); progress comes with the running ones. */
  private async liveFields(rows: Pick<GenerationModel, 'id' | 'status' | 'mediaType'>[]): Promise<Map<string, LiveFields>> {
    const out = new Map<string, LiveFields>();
    const queued = rows.filter((r) => r.status === 'queued').map((r) => ({ id: r.id, pool: r.mediaType }));
    const processing = rows.filter((r) => r.status === 'processing').map((r) => r.id);
    const [positions, progress] = await Promise.all([
      this.positions.positions(queued).catch(() => new Map<string, number | null>()),
      this.progress.read(processing).catch(() => new Map<string, number | null>()),
    ]);
    for (const { id } of queued) out.set(id, { queuePosition: positions.get(id) ?? null, progress: null });
    for (const id of processing) out.set(id, { queuePosition: null, progress: progress.get(id) ?? null });
    return out;
  }
}
