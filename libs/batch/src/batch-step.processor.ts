import { Injectable } from '@nestjs/common';
import { BATCH_STEP_QUEUE, type BatchStepJob } from '@atelier/contracts';
import { HandlesQueue, type JobHandler } from '@atelier/runtime';
import { BatchFinalize } from './batch-finalize.use-case';
import { BatchValidation } from './batch-validation.use-case';

/** A batch's own steps on the queue-worker: its validation (then its lines' dispatch), and its final files. */
@Injectable()
@HandlesQueue(BATCH_STEP_QUEUE)
export class BatchStepProcessor implements JobHandler<typeof BATCH_STEP_QUEUE> {
  constructor(
    private readonly validation: BatchValidation,
    private readonly finalizing: BatchFinalize,
  ) {}

  handle(job: BatchStepJob): Promise<void> {
    return job.step === 'validate' ? this.validation.validate(job.batchId, job.requestId) : this.finalizing.finalize(job.batchId);
  }
}
