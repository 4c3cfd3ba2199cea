import { BATCH_STEP_QUEUE } from '@atelier/contracts';
import type { JobQueues } from '@atelier/runtime';

/** Adds a batch's step job; its id makes a second add of the same step while the first is kept harmless. */
export function stepJob(queues: JobQueues, id: string, step: 'validate' | 'finalize', requestId: string) {
  return queues.add(BATCH_STEP_QUEUE, { batchId: id, step, requestId }, { jobId: `${step}-${id}` });
}
