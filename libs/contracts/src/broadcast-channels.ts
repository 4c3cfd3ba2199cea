/**
 * Redis pub/sub channels: broadcasts every replica must see. Delivery is at-most-once to
 * whoever is subscribed right now, which is exactly the spec's event semantics.
 */
export interface BroadcastChannel<TName extends string, TPayload> {
  readonly name: TName;
  readonly __payload?: TPayload;
}

function channel<TPayload>() {
  return <TName extends string>(name: TName): BroadcastChannel<TName, TPayload> => Object.freeze({ name });
}

export type BroadcastPayloadOf<C> = C extends BroadcastChannel<string, infer P> ? P : never;

/** A generation reached succeeded/failed; events pods forward it to the owner's SSE streams. */
export interface GenerationCompletedEvent {
  userId: string;
  namespaceId: string;
  generation_id: string;
  status: 'succeeded' | 'failed';
  model_name: string;
  media_type: 'image' | 'video';
  /** Blob key of the first output; subscribers turn it into a temporary link when delivering. */
  result_key: string | null;
  error_message: string | null;
  completed_at: number;
  /** Its id in the owner's retained events (UserEventLog): the SSE `id:` line. Absent from older publishers. */
  event_id?: string;
}

/** Ask whichever worker runs these jobs to stop them now. */
export interface CancelJobsEvent {
  queue: string;
  jobIds: string[];
  reason: string;
}

/** An API key stopped being valid; replicas drop it from their auth cache. */
export interface ApiKeyRevokedEvent {
  prefix: string;
}

/**
 * A namespace's limits changed: replicas drop what they cached of its keys, then push one entry to
 * `ackKey` so the operator's PUT answers only once every replica will apply the new limits.
 */
export interface NamespaceLimitsChangedEvent {
  namespaceId: string;
  ackKey: string;
}

/**
 * Any other event of a user's stream, by its SSE event type (`fine_tune.status`, with the
 * fine-tune record as data; `batch.status`, with the batch object; `export.status`, with a queued
 * export of stored completions once it ended). Retained in the user's event log like completions.
 */
export interface UserStreamEvent {
  userId: string;
  type: 'fine_tune.status' | 'batch.status' | 'export.status';
  data: Record<string, unknown>;
  event_id?: string;
}

/** A fine-tune became enqueued: trainers long-polling for a lease look again. */
export interface FineTuneEnqueuedEvent {
  fineTuneId: string;
  baseModel: string;
}

export const USER_EVENTS_CHANNEL = channel<UserStreamEvent>()('events.user');
export const FINE_TUNE_ENQUEUED_CHANNEL = channel<FineTuneEnqueuedEvent>()('control.fine-tune-enqueued');
export const GENERATION_COMPLETED_CHANNEL = channel<GenerationCompletedEvent>()('events.generation-completed');
export const CANCEL_JOBS_CHANNEL = channel<CancelJobsEvent>()('control.cancel-jobs');
export const API_KEY_REVOKED_CHANNEL = channel<ApiKeyRevokedEvent>()('control.api-key-revoked');
export const NAMESPACE_LIMITS_CHANGED_CHANNEL = channel<NamespaceLimitsChangedEvent>()('control.namespace-limits-changed');
