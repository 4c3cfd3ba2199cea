import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import type { AppConfig } from '@atelier/config';
import { ApiError, FINE_TUNE_INSPECT_QUEUE, FINE_TUNE_TOKENIZE_QUEUE, UUID_PATTERN } from '@atelier/contracts';
import { Prisma } from '@atelier/db';
import { RepositoriesService, repositoryNotFound, type RepositoryRecord } from '@atelier/repos';
import { JobQueues, RpcClient } from '@atelier/runtime';
import { BlobStore } from '@atelier/storage';
import { invalidFineTune, parseCreateFineTune } from './fine-tune-request';
import { FINE_TUNE_STATES, isFineTuneState, RUNNING_STATES, type FineTuneState } from './fine-tune-states';
import { blobAsyncBuffer, openParquet, ParquetReadError, type DatasetLimits, type ParquetDataset } from './parquet-dataset';
import type { TokenizationStats } from './tokenize-dataset';
import { referencedColumns, type FieldProblem } from './training-params';
import type { ScriptType } from './base-models';
import { FineTunesRepository, type FineTuneRow } from './fine-tunes.repository';

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
  /** The run: credits charged once it ended, what the trainer trained, its times (Unix seconds). */
  credits_used: string | null;
  trained_tokens: number | null;
  trained_steps: number | null;
  attempt: number;
  run_requested: boolean;
  stop_requested: boolean;
  enqueued_at: number | null;
  started_at: number | null;
  finished_at: number | null;
  created_at: number;
  updated_at: number;
}


/** The run fields of the public fine-tune object (beside FineTuneView's). */
export function runFields(ft: FineTuneRow) {
  const unix = (d: Date | null) => (d ? Math.floor(d.getTime() / 1000) : null);
  return {
    credits_used: ft.creditsUsed === null ? null : new Prisma.Decimal(ft.creditsUsed).toFixed(),
    trained_tokens: ft.trainedTokens === null ? null : Number(ft.trainedTokens),
    trained_steps: ft.trainedSteps,
    attempt: ft.attempt,
    run_requested: ft.runRequested,
    stop_requested: ft.stopRequestedAt !== null,
    enqueued_at: unix(ft.enqueuedAt),
    started_at: unix(ft.startedAt),
    finished_at: unix(ft.finishedAt),
  };
}

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
    ...runFields(ft),
    created_at: unix(ft.createdAt),
    updated_at: unix(ft.updatedAt),
  };
}

/** The exact bytes a dataset was read from: what tokenization pins for the run. */
export interface DatasetSource {
  blobKey: string;
  sha256: string;
  size: bigint;
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
  limits: DatasetLimits,
): Promise<(ParquetDataset & { source: DatasetSource }) | string> {
  const file = await repos.findFile(repo.id, resource.branch, resource.path);
  if (!file) return `'${resource.branch}/${resource.path}' does not exist in repository ${repo.namespace}/${repo.name}`;
  try {
    const dataset = await openParquet(blobAsyncBuffer(blobs, file.blobKey, Number(file.size)), limits);
    return Object.assign(dataset, { source: { blobKey: file.blobKey, sha256: file.sha256, size: file.size } });
  } catch (err) {
    if (err instanceof ParquetReadError) return `'${resource.branch}/${resource.path}' is not a readable Parquet file: ${err.message}`;
    throw err;
  }
}

/** The DATASET_* settings as the Parquet reader takes them. */
export function datasetLimits(config: Pick<AppConfig, 'DATASET_MAX_FOOTER_BYTES' | 'DATASET_MAX_ROWS' | 'DATASET_MAX_WINDOW_ROWS' | 'DATASET_MAX_WINDOW_BYTES'>): DatasetLimits {
  return {
    maxFooterBytes: config.DATASET_MAX_FOOTER_BYTES,
    maxRows: config.DATASET_MAX_ROWS,
    maxWindowRows: config.DATASET_MAX_WINDOW_ROWS,
    maxWindowBytes: config.DATASET_MAX_WINDOW_BYTES,
  };
}

/** Problems of every column a script type's params name that the dataset (its columns) lacks. */
export function missingColumns(scriptType: ScriptType, params: Record<string, unknown>, columns: readonly string[], resource: string): FieldProblem[] {
  return referencedColumns(scriptType, params)
    .filter((c) => !columns.includes(c.column))
    .map((c) => ({ field: c.field, message: `column '${c.column}' does not exist in ${resource}; its columns are: ${columns.join(', ')}` }));
}

/** A fine-tune as READ_FINE_TUNE and the list statements return it: the public object's own fields, times in Unix seconds. */
type FineTuneJson = Omit<FineTuneView, 'namespace' | 'repo_name'>;


/** The public object of a fine-tune read as FineTuneJson (its keys already the public names, in order). */
function fromJson({ id, name, ...fields }: FineTuneJson, namespace: string, repo: string): FineTuneView {
  return { id, name, namespace, repo_name: repo, ...fields };
}

/** Create, read, list, delete and start tokenization of fine-tunes in a repository. */
@Injectable()
export class FineTunesService {
  constructor(
    private readonly fineTunes: FineTunesRepository,
    private readonly queues: JobQueues,
    private readonly rpc: RpcClient,
  ) {}

  async create(repo: RepositoryRecord, userId: string, body: unknown, requestId: string): Promise<FineTuneView> {
    const parsed = parseCreateFineTune(body);
    const problems = [...parsed.problems];
    if (parsed.resource) {
      // Read by the fine-tune service: a footer is as large as its author made it (up to DATASET_MAX_FOOTER_BYTES).
      const dataset = await this.rpc.call(FINE_TUNE_INSPECT_QUEUE, {
        repository: { id: repo.id, namespace: repo.namespace, name: repo.name },
        branch: parsed.resource.branch,
        path: parsed.resource.path,
        requestId,
      });
      if ('problem' in dataset) problems.push({ field: 'resource', message: dataset.problem });
      else if (parsed.scriptType) problems.push(...missingColumns(parsed.scriptType, parsed.params, dataset.columns, `${parsed.resource.branch}/${parsed.resource.path}`));
    }
    if (problems.length || !parsed.request) throw invalidFineTune(problems);
    const req = parsed.request;
    const id = randomUUID();
    const row = await this.fineTunes.create({
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
    });
    return toFineTuneView(row, repo);
  }

  /**
   * GET of one fine-tune, by the repository's namespace (already resolved for the caller) and
   * name: one statement, where the other routes read the repository first. The same answers:
   * 404 for an unknown repository, then for an unknown or malformed id.
   */
  async get(namespace: { id: string; name: string }, repoName: string, id: string): Promise<FineTuneView> {
    const found = await this.fineTunes.readJson<FineTuneJson>(namespace.id, repoName, UUID_PATTERN.test(id) ? id : null);
    if (!found) throw repositoryNotFound(namespace.name, repoName);
    if (!found.row) throw ApiError.notFound(`Fine-tune not found: ${id}`);
    return fromJson(found.row, namespace.name, found.repo);
  }

  /** GET of a repository's fine-tunes (filtered by status, paginated): one statement, like get. */
  async list(namespace: { id: string; name: string }, repoName: string, query: { status?: unknown; limit?: unknown; offset?: unknown }) {
    const status = query.status === undefined || query.status === '' ? undefined : query.status;
    if (status !== undefined && !isFineTuneState(status)) throw ApiError.badRequest(`status must be one of ${FINE_TUNE_STATES.join(', ')}`);
    const limit = intParam(query.limit, 'limit', 20, 1, 100);
    const offset = intParam(query.offset, 'offset', 0, 0, 1_000_000);
    const found = await this.fineTunes.listJson<FineTuneJson>(namespace.id, repoName, status as string | undefined, limit, offset);
    if (!found) throw repositoryNotFound(namespace.name, repoName);
    const { repo, total, rows: page } = found;
    return { fine_tunes: page.map((ft) => fromJson(ft, namespace.name, repo)), total, limit, offset };
  }


  /** Only when nothing is running for it; the state check and the delete are one statement. */
  async delete(repo: RepositoryRecord, id: string): Promise<FineTuneView> {
    const ft = await this.find(repo, id);
    if (!(await this.fineTunes.deleteUnlessIn(ft.id, RUNNING_STATES))) {
      const current = await this.find(repo, id);
      throw new ApiError('invalid_state', `Fine-tune ${id} is ${current.state}; it can be deleted once it is no longer running`);
    }
    return toFineTuneView(ft, repo);
  }

  /** created -> tokenizing, atomically, then a job on fine-tune-tokenize does the work. */
  async startTokenization(repo: RepositoryRecord, id: string, requestId: string): Promise<FineTuneView> {
    await this.find(repo, id);
    const moved = await this.fineTunes.updateInStates(id, ['created'], { state: 'tokenizing' satisfies FineTuneState, errorMessage: null, tokenization: Prisma.DbNull }, undefined, repo.id);
    if (!moved) {
      const current = await this.find(repo, id);
      throw new ApiError('invalid_state', `Fine-tune ${id} is in state '${current.state}'; tokenization can only be started from state 'created'`);
    }
    // Read before queueing: a fast job could otherwise already have moved it on.
    const tokenizing = await this.find(repo, id);
    try {
      await this.queues.add(FINE_TUNE_TOKENIZE_QUEUE, { fineTuneId: id, requestId });
    } catch {
      await this.fineTunes.updateInStates(id, ['tokenizing'], { state: 'created' });
      throw new ApiError('service_unavailable', 'Could not queue the tokenization; try again');
    }
    return toFineTuneView(tokenizing, repo);
  }

  private find(repo: RepositoryRecord, id: string): Promise<FineTuneRow> {
    return findFineTune(this.fineTunes, repo, id);
  }
}

/** A repository's fine-tune by id; 404 for an unknown or malformed one. */
export async function findFineTune(fineTunes: FineTunesRepository, repo: { id: string }, id: string): Promise<FineTuneRow> {
  const ft = UUID_PATTERN.test(id) ? await fineTunes.inRepository(repo.id, id) : null;
  if (!ft) throw ApiError.notFound(`Fine-tune not found: ${id}`);
  return ft;
}

/** An integer query parameter between min and max (fallback when absent), or a 400 saying so. */
export function intParam(value: unknown, name: string, fallback: number, min: number, max: number): number {
  if (value === undefined || value === '') return fallback;
  if (typeof value !== 'string' || !/^\d+$/.test(value)) throw ApiError.badRequest(`${name} must be an integer between ${min} and ${max}`);
  const n = Number(value);
  if (n < min || n > max) throw ApiError.badRequest(`${name} must be an integer between ${min} and ${max}`);
  return n;
}
