import { Inject } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { FINE_TUNE_INSPECT_QUEUE, type DatasetInspectJob, type DatasetInspection } from '@atelier/contracts';
import { RepositoriesService } from '@atelier/repos';
import { HandlesQueue, type JobHandler } from '@atelier/runtime';
import { BlobStore } from '@atelier/storage';
import { datasetLimits, openResource } from './fine-tunes.service';

/**
 * Consumes fine-tune-inspect: reads a dataset's footer within the DATASET_* limits and answers
 * its columns and rows (or why it cannot be used) to the gateway creating a fine-tune.
 */
@HandlesQueue(FINE_TUNE_INSPECT_QUEUE)
export class DatasetInspectionProcessor implements JobHandler<typeof FINE_TUNE_INSPECT_QUEUE> {
  constructor(
    private readonly repos: RepositoriesService,
    private readonly blobs: BlobStore,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async handle(job: DatasetInspectJob): Promise<DatasetInspection> {
    const dataset = await openResource(this.repos, this.blobs, job.repository, { branch: job.branch, path: job.path }, datasetLimits(this.config));
    return typeof dataset === 'string' ? { problem: dataset } : { columns: dataset.columns, rows: dataset.rows };
  }
}
