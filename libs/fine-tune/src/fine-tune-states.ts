/**
 * Fine-tune states. Tokenization moves created -> tokenizing -> tokenized | errored; the
 * training states after `tokenized` belong to the external trainer (a later issue).
 */
import { FINE_TUNE_STATES } from '@atelier/contracts';

export { FINE_TUNE_STATES };
export type FineTuneState = (typeof FINE_TUNE_STATES)[number];

/** States in which work is under way; such a fine-tune cannot be deleted. */
export const RUNNING_STATES: readonly FineTuneState[] = ['tokenizing', 'enqueued', 'running'];

export function isFineTuneState(value: unknown): value is FineTuneState {
  return typeof value === 'string' && (FINE_TUNE_STATES as readonly string[]).includes(value);
}
