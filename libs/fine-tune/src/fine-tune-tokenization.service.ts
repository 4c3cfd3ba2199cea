import { Inject, Injectable, Logger } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { Prisma } from '@atelier/db';
import { RepositoriesService } from '@atelier/repos';
import { BlobStore } from '@atelier/storage';
import { baseModelSpec, isScriptType } from './base-models';
import { parseResource } from './fine-tune-request';
import type { FineTuneState } from './fine-tune-states';
import { datasetLimits, missingColumns, openResource, type DatasetSource } from './fine-tunes.service';
import { ParquetReadError } from './parquet-dataset';
import { tokenizeDataset, type TokenizationStats } from './tokenize-dataset';
import { TokenizerRegistry } from './tokenizers';
import { FineTuneRuns } from './fine-tune-runs.service';
import { FineTunesRepository } from './fine-tunes.repository';

/** The dataset cannot be tokenized as it is; the fine-tune errors with this message. */
export class DatasetUnusableError extends Error {
  constructor(
    message: string,
    readonly stats?: TokenizationStats,
  ) {
    super(message);
  }
}

export interface TokenizationRunContext {
  signal: AbortSignal;
  /** No retry follows this attempt: an unexpected failure must leave the fine-tune errored. */
  finalAttempt: boolean;
}

/**
 * The fine-tune-tokenize job: tokenizes the dataset of a fine-tune in state `tokenizing` and
 * moves it to `tokenized` (stats stored) or `errored` (clear message, plus the stats when the
 * rows were read). Every write is conditional on the state still being `tokenizing`, so a
 * duplicate job or a concurrent change never overwrites a later state.
 */
@Injectable()
export class FineTuneTokenization {
  private readonly logger = new Logger(FineTuneTokenization.name);

  constructor(
    private readonly fineTunes: FineTunesRepository,
    private readonly repos: RepositoriesService,
    private readonly blobs: BlobStore,
    private readonly tokenizers: TokenizerRegistry,
    private readonly runs: FineTuneRuns,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async run(fineTuneId: string, ctx: TokenizationRunContext): Promise<void> {
    const ft = await this.fineTunes.byIdWithRepository(fineTuneId);
    if (!ft || ft.state !== ('tokenizing' satisfies FineTuneState)) return;
    try {
      const { stats, source } = await this.tokenize(ft, ctx.signal);
      await this.finish(fineTuneId, 'tokenized', null, stats, source);
    } catch (err) {
      if (err instanceof DatasetUnusableError) {
        await this.finish(fineTuneId, 'errored', err.message, err.stats ?? null);
        return;
      }
      if (ctx.finalAttempt && !ctx.signal.aborted) {
        this.logger.error(`Tokenization of ${fineTuneId} failed: ${(err as Error).stack ?? err}`);
        await this.finish(fineTuneId, 'errored', 'Tokenization failed because of an internal error; create the fine-tune again to retry', null);
      }
      throw err;
    }
  }

  private async tokenize(
    ft: { id: string; baseModel: string; scriptType: string; resource: string; trainingParams: Prisma.JsonValue; repository: { id: string; name: string; namespace: { name: string } } },
    signal: AbortSignal,
  ): Promise<{ stats: TokenizationStats; source: DatasetSource }> {
    const model = baseModelSpec(ft.baseModel);
    const resource = parseResource(ft.resource);
    if (!model || !isScriptType(ft.scriptType) || typeof resource === 'string')
      throw new DatasetUnusableError(`The fine-tune's base model, script type or resource is no longer supported`);
    const repo = { id: ft.repository.id, name: ft.repository.name, namespace: ft.repository.namespace.name };
    const dataset = await openResource(this.repos, this.blobs, repo, resource, datasetLimits(this.config));
    if (typeof dataset === 'string') throw new DatasetUnusableError(`The dataset cannot be read: ${dataset}`);
    const params = ft.trainingParams as Record<string, unknown>;
    const missing = missingColumns(ft.scriptType, params, dataset.columns, ft.resource);
    if (missing.length) throw new DatasetUnusableError(`The dataset changed since the fine-tune was created: ${missing.map((m) => `${m.field}: ${m.message}`).join('; ')}`);
    if (dataset.rows === 0) throw new DatasetUnusableError(`The dataset ${ft.resource} has no rows`);

    const counter = await this.tokenizers.get(model.tokenizer);
    let stats: TokenizationStats;
    try {
      stats = await tokenizeDataset({
        dataset,
        scriptType: ft.scriptType,
        params,
        model,
        counter,
        maxInvalidExamples: this.config.TOKENIZE_INVALID_EXAMPLES,
        signal,
        existingPaths: (paths) => this.fineTunes.existingPaths(repo.id, resource.branch, paths),
      });
    } catch (err) {
      if (err instanceof ParquetReadError) throw new DatasetUnusableError(`The dataset ${ft.resource} could not be read: ${err.message}`);
      throw err;
    }
    if (stats.valid_rows === 0)
      throw new DatasetUnusableError(
        `The dataset has no usable rows: all ${stats.rows} rows are invalid (first problem: row ${stats.invalid_examples[0]?.row}: ${stats.invalid_examples[0]?.reason})`,
        stats,
      );
    return { stats, source: dataset.source };
  }

  /** A tokenized run pins the bytes it was counted (and will be charged) on: the lease serves exactly those. */
  private async finish(id: string, state: FineTuneState, error: string | null, stats: TokenizationStats | null, source?: DatasetSource): Promise<void> {
    const ended = await this.runs.transition(id, ['tokenizing'], state, {
      errorMessage: error,
      datasetBlobKey: source?.blobKey ?? null,
      datasetSha256: source?.sha256 ?? null,
      datasetSize: source?.size ?? null,
      tokenization: stats ? (stats as unknown as Prisma.InputJsonValue) : Prisma.DbNull,
      ...(state === 'errored' && { runRequested: false }),
    });
    // A run asked for while it tokenized starts now (the trainer sweep retries it after a crash here).
    if (ended?.state === 'tokenized' && ended.runRequested) await this.runs.enqueueAfterTokenization(id);
  }
}
