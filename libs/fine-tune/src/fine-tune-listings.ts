import { ApiError } from '@atelier/contracts';
import { Prisma } from '@atelier/db';
import { FINE_TUNE_STATES, isFineTuneState } from './fine-tune-states';
import { intParam } from './fine-tunes.service';

export const LISTING_SORTS = ['created_at', '-created_at', 'updated_at', '-updated_at', 'name', '-name'] as const;

export interface ListingQuery {
  page?: unknown;
  page_size?: unknown;
  search?: unknown;
  status?: unknown;
  created_by?: unknown;
  sort?: unknown;
}

const text = (value: unknown, name: string): string | undefined => {
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string') throw ApiError.badRequest(`${name} must be given once, as a string`);
  if (value.includes('\u0000')) throw ApiError.badRequest(`${name} must not contain NUL characters`);
  return value;
};

/**
 * The filters of GET /api/user/fine_tunes and /api/orgs/{name}/fine_tunes, as the hub takes them:
 * `page` (from 1), `page_size` (1-100, 20), `search` (in the fine-tune's or its repository's name),
 * `status`, `created_by` (a username), `sort` (a field, `-` for descending; newest first).
 */
export function listingQuery(namespaceId: string, query: ListingQuery, userIdOf: (username: string) => string | undefined) {
  const page = intParam(query.page, 'page', 1, 1, 1_000_000);
  const pageSize = intParam(query.page_size, 'page_size', 20, 1, 100);
  const status = text(query.status, 'status');
  if (status !== undefined && !isFineTuneState(status)) throw ApiError.badRequest(`status must be one of ${FINE_TUNE_STATES.join(', ')}`);
  const sort = text(query.sort, 'sort') ?? '-created_at';
  if (!(LISTING_SORTS as readonly string[]).includes(sort)) throw ApiError.badRequest(`sort must be one of ${LISTING_SORTS.join(', ')}`);
  const search = text(query.search, 'search');
  const createdBy = text(query.created_by, 'created_by');
  const where: Prisma.FineTuneWhereInput = {
    namespaceId,
    ...(status && { state: status }),
    ...(search && { OR: [{ name: { contains: search, mode: 'insensitive' } }, { repository: { name: { contains: search, mode: 'insensitive' } } }] }),
    // An unknown username matches nothing.
    ...(createdBy && { createdById: userIdOf(createdBy) ?? '00000000-0000-0000-0000-000000000000' }),
  };
  const field = sort.replace(/^-/, '') as 'created_at' | 'updated_at' | 'name';
  const direction = sort.startsWith('-') ? 'desc' : 'asc';
  const column = ({ created_at: 'createdAt', updated_at: 'updatedAt', name: 'name' } as const)[field];
  return { where, orderBy: [{ [column]: direction }, { id: direction }] as Prisma.FineTuneOrderByWithRelationInput[], skip: (page - 1) * pageSize, take: pageSize, page, pageSize };
}
