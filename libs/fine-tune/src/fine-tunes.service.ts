import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { ApiError, FINE_TUNE_TOKENIZE_QUEUE, UUID_PATTERN } from '@atelier/contracts';
import { Prisma, PrismaService } from '@atelier/db';
import { RepositoriesService, type RepositoryRecord } from '@atelier/repos';
import { JobQueues } from '@atelier/runtime';
import { BlobStore } from '@atelier/storage';
import { invalidFineTune, parseCreateFineTune } from './fine-tune-request';
import { FINE_TUNE_STATES, isFineTuneState, RUNNING_STATES, type FineTuneState } from './fine-tune-states';
import { blobAsyncBuffer, openParquet, ParquetReadError, type ParquetDataset } from './parquet-dataset';
import type { TokenizationStats } from './tokenize-dataset';
import { referencedColumns, type FieldProblem } from './training-params';
import type { ScriptType } from './base-models';

/** The public fine-tune object. */
export interface FineTuneView {
  id: string;
  name: string;
  namespace: string;
  repo_name: string;
  resource: string;
  base_model: string;
  script_type: string;
  training_params: Record<string, unknown>;
  status: string;
  /** Why the fine-tune errored; null otherwise. */
  error: string | null;
  /** Filled by tokenization. */
  tokenization: TokenizationStats | null;
  created_at: number;
  updated_at: number;
}

type FineTuneRow = Prisma.FineTuneGetPayload<object>;

const unix = (d: Date) => Math.floor(d.getTime() / 1000);

export function toFineTuneView(ft: FineTuneRow, repo: { namespace: string; name: string }): FineTuneView {
  return {
    id: ft.id,
    name: ft.name,
    namespace: repo.namespace,
    repo_name: repo.name,
    resource: ft.resource,
    base_model: ft.baseModel,
    script_type: ft.scriptType,
    training_params: ft.trainingParams as Record<string, unknown>,
    status: ft.state,
    error: ft.errorMessage,
    tokenization: (ft.tokenization as TokenizationStats | null) ?? null,
    created_at: unix(ft.createdAt),
    updated_at: unix(ft.updatedAt),
  };
}

/**
 * Opens the Parquet file a fine-tune points at, or explains why not. Shared by create
 * (answered as 400 problems) and tokenization (which errors the fine-tune).
 */
export async function openResource(
  repos: RepositoriesService,
  blobs: BlobStore,
  repo: { id: string; namespace: string; name: string },
  resource: { branch: string; path: string },
): Promise<ParquetDataset | string> {
  const file = await repos.findFile(repo.id, resource.branch, resource.path);
  if (!file) return `'${resource.branch}/${resource.path}' does not exist in repository ${repo.namespace}/${repo.name}`;
  try {
    return await openParquet(blobAsyncBuffer(blobs, file.blobKey, Number(file.size)));
  } catch (err) {
    if (err instanceof ParquetReadError) return `'${resource.branch}/${resource.path}' is not a readable Parquet file: ${err.message}`;
    throw err;
  }
}

/** Problems of every column a script type's params name that the dataset lacks. */
export function missingColumns(scriptType: ScriptType, params: Record<string, unknown>, dataset: ParquetDataset, resource: string): FieldProblem[] {
  return referencedColumns(scriptType, params)
    .filter((c) => !dataset.columns.includes(c.column))
    .map((c) => ({ field: c.field, message: `column '${c.column}' does not exist in ${resource}; its columns are: ${dataset.columns.join(', ')}` }));
}

/** Create, read, list, delete and start tokenization of fine-tunes in a repository. */
@Injectable()
export class FineTunesService {
  constructor(
    private readonly prisma: PrismaService,
    private readonly repos: RepositoriesService,
    private readonly blobs: BlobStore,
    private readonly queues: JobQueues,
  ) {}

  async create(repo: RepositoryRecord, userId: string, body: unknown): Promise<FineTuneView> {
    const parsed = parseCreateFineTune(body);
    const problems = [...parsed.problems];
    if (parsed.resource) {
      const dataset = await openResource(this.repos, this.blobs, repo, parsed.resource);
      if (typeof dataset === 'string') problems.push({ field: 'resource', message: dataset });
      else if (parsed.scriptType) problems.push(...missingColumns(parsed.scriptType, parsed.params, dataset, `${parsed.resource.branch}/${parsed.resource.path}`));
    }
    if (problems.length || !parsed.request) throw invalidFineTune(problems);
    const req = parsed.request;
    const id = randomUUID();
    const row = await this.prisma.fineTune.create({
      data: {
        id,
        name: req.name ?? `${repo.name}-${req.base_model.split('/').pop()}-${id.slice(0, 8)}`,
        repositoryId: repo.id,
        namespaceId: repo.namespaceId,
        createdById: userId,
        baseModel: req.base_model,
        scriptType: req.script_type,
        resource: req.resource,
        trainingParams: req.training_params as Prisma.InputJsonValue,
        state: 'created',
      },
    });
    return toFineTuneView(row, repo);
  }

  async get(repo: RepositoryRecord, id: string): Promise<FineTuneView> {
    return toFineTuneView(await this.find(repo, id), repo);
  }

  async list(repo: RepositoryRecord, query: { status?: unknown; limit?: unknown; offset?: unknown }) {
    const status = query.status === undefined || query.status === '' ? undefined : query.status;
    if (status !== undefined && !isFineTuneState(status)) throw ApiError.badRequest(`status must be one of ${FINE_TUNE_STATES.join(', ')}`);
    const limit = intParam(query.limit, 'limit', 20, 1, 100);
    const offset = intParam(query.offset, 'offset', 0, 0, 1_000_000);
    const where = { repositoryId: repo.id, ...(status ? { state: status } : {}) };
    const [rows, total] = await Promise.all([
      this.prisma.fineTune.findMany({ where, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }], take: limit, skip: offset }),
      this.prisma.fineTune.count({ where }),
    ]);
    return { fine_tunes: rows.map((r) => toFineTuneView(r, repo)), total, limit, offset };
  }

  /** Only when nothing is running for it; the state check and the delete are one statement. */
  async delete(repo: RepositoryRecord, id: string): Promise<FineTuneView> {
    const ft = await this.find(repo, id);
    const deleted = await this.prisma.fineTune.deleteMany({ where: { id: ft.id, state: { notIn: [...RUNNING_STATES] } } });
    if (deleted.count === 0) {
      const current = await this.find(repo, id);
      throw new ApiError('invalid_state', `Fine-tune ${id} is ${current.state}; it can be deleted once it is no longer running`);
    }
    return toFineTuneView(ft, repo);
  }

  /** created -> tokenizing, atomically, then a job on fine-tune-tokenize does the work. */
  async startTokenization(repo: RepositoryRecord, id: string, requestId: string): Promise<FineTuneView> {
    await this.find(repo, id);
    const moved = await this.prisma.fineTune.updateMany({
      where: { id, repositoryId: repo.id, state: 'created' satisfies FineTuneState },
      data: { state: 'tokenizing' satisfies FineTuneState, errorMessage: null, tokenization: Prisma.DbNull },
    });
    if (moved.count === 0) {
      const current = await this.find(repo, id);
      throw new ApiError('invalid_state', `Fine-tune ${id} is in state '${current.state}'; tokenization can only be started from state 'created'`);
    }
    // Read before queueing: a fast job could otherwise already have moved it on.
    const tokenizing = await this.find(repo, id);
    try {
      await this.queues.add(FINE_TUNE_TOKENIZE_QUEUE, { fineTuneId: id, requestId });
    } catch {
      await this.prisma.fineTune.updateMany({ where: { id, state: 'tokenizing' }, data: { state: 'created' } });
      throw new ApiError('service_unavailable', 'Could not queue the tokenization; try again');
    }
    return toFineTuneView(tokenizing, repo);
  }

  private async find(repo: RepositoryRecord, id: string): Promise<FineTuneRow> {
    const ft = UUID_PATTERN.test(id) ? await this.prisma.fineTune.findFirst({ where: { id, repositoryId: repo.id } }) : null;
    if (!ft) throw ApiError.notFound(`Fine-tune not found: ${id}`);
    return ft;
  }
}

function intParam(value: unknown, name: string, fallback: number, min: number, max: number): number {
  if (value === undefined || value === '') return fallback;
  if (typeof value !== 'string' || !/^\d+$/.test(value)) throw ApiError.badRequest(`${name} must be an integer between ${min} and ${max}`);
  const n = Number(value);
  if (n < min || n > max) throw ApiError.badRequest(`${name} must be an integer between ${min} and ${max}`);
  return n;
}
