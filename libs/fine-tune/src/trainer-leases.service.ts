import { createHash } from 'node:crypto';
import { Transform, type Readable } from 'node:stream';
import { Inject, Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ApiError, FINE_TUNE_ENQUEUED_CHANNEL, UUID_PATTERN } from '@atelier/contracts';
import type { Prisma } from '@atelier/db';
import { pathSegments } from '@atelier/repos';
import { BroadcastBus } from '@atelier/runtime';
import { BlobStore, SignedUrls } from '@atelier/storage';
import { parseResource } from './fine-tune-request';
import { MAX_CHECKPOINTS_PER_RUN, MAX_TRAINING_STEPS } from './training-params';
import { FineTuneRuns } from './fine-tune-runs.service';
import { runFields, toFineTuneView } from './fine-tunes.service';
import type { TrainerIdentity } from './trainers.service';
import { FineTunesRepository, type FineTuneRow, type FineTuneTx } from './fine-tunes.repository';
import { TrainersRepository, type LeaseRow } from './trainers.repository';


export const TRAINER_EVENT_TYPES = ['log', 'metrics', 'checkpoint', 'status'] as const;
export const TRAINER_PHASES = ['downloading', 'training', 'uploading'] as const;
const MAX_EVENTS_PER_CALL = 500;
const MAX_LOG_LINE = 10_000;

export interface TrainerEvent {
  seq: number;
  type: (typeof TRAINER_EVENT_TYPES)[number];
  body: Record<string, unknown>;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/** The events of one call, checked whole: a bad one refuses the call and applies nothing. */
export function parseTrainerEvents(body: unknown): TrainerEvent[] {
  if (!isObject(body) || !Array.isArray(body.events)) throw ApiError.badRequest('Request body must be {"events": [...]}');
  if (body.events.length > MAX_EVENTS_PER_CALL) throw ApiError.badRequest(`At most ${MAX_EVENTS_PER_CALL} events per call`);
  // Postgres keeps no NUL in text or jsonb: refused here rather than failing the write.
  if (JSON.stringify(body.events).includes('\\u0000')) throw ApiError.badRequest('Events must not contain NUL characters');
  return body.events.map((raw, i) => {
    const at = `events[${i}]`;
    if (!isObject(raw)) throw ApiError.badRequest(`${at} must be an object`);
    const { seq, type, ...rest } = raw;
    if (!isCount(seq) || seq < 1) throw ApiError.badRequest(`${at}.seq must be a positive integer, increasing per lease`);
    if (typeof type !== 'string' || !(TRAINER_EVENT_TYPES as readonly string[]).includes(type)) throw ApiError.badRequest(`${at}.type must be one of ${TRAINER_EVENT_TYPES.join(', ')}`);
    if (type === 'log' && (typeof rest.line !== 'string' || rest.line.length > MAX_LOG_LINE)) throw ApiError.badRequest(`${at}.line must be a string of at most ${MAX_LOG_LINE} characters`);
    if ((type === 'metrics' || type === 'checkpoint') && !isCount(rest.step)) throw ApiError.badRequest(`${at}.step must be a non-negative integer`);
    if (type === 'metrics') for (const [k, v] of Object.entries(rest)) if (typeof v !== 'number' || !Number.isFinite(v)) throw ApiError.badRequest(`${at}.${k} must be a finite number`);
    if (type === 'checkpoint' && rest.metrics !== undefined && !isObject(rest.metrics)) throw ApiError.badRequest(`${at}.metrics must be an object`);
    if (type === 'status' && (typeof rest.phase !== 'string' || !(TRAINER_PHASES as readonly string[]).includes(rest.phase)))
      throw ApiError.badRequest(`${at}.phase must be one of ${TRAINER_PHASES.join(', ')}`);
    return { seq, type: type as TrainerEvent['type'], body: rest };
  });
}

/**
 * The trainer side of a fine-tune run (README, "The trainer protocol"): leases long-polled from
 * the enqueued fine-tunes of the trainer's base models, events that are heartbeats too,
 * checkpoint files, and the run's end. Postgres holds every decision: a lease is a row that only
 * one trainer can take (SKIP LOCKED, one active lease per fine-tune by a unique column), and every
 * call on it locks it first, so retries, replicas and crashes cannot run or charge a run twice.
 */
@Injectable()
export class TrainerLeases implements OnModuleDestroy {
  private readonly logger = new Logger(TrainerLeases.name);
  /** Long-polls waiting on this replica; a fine-tune enqueued anywhere wakes them. */
  private readonly waiting = new Set<() => void>();
  private unsubscribe?: Promise<() => Promise<void>>;
  /** Shutting down: long-polls answer 204 now instead of looking again. */
  private closing = false;

  constructor(
    private readonly fineTunes: FineTunesRepository,
    private readonly trainers: TrainersRepository,
    private readonly runs: FineTuneRuns,
    private readonly blobs: BlobStore,
    private readonly urls: SignedUrls,
    private readonly bus: BroadcastBus,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async onModuleDestroy(): Promise<void> {
    this.closing = true;
    for (const wake of [...this.waiting]) wake();
    await (await this.unsubscribe)?.().catch(() => undefined);
  }

  private listen(): void {
    this.unsubscribe ??= this.bus.subscribe(FINE_TUNE_ENQUEUED_CHANNEL, () => {
      for (const wake of [...this.waiting]) wake();
    });
  }

  /** POST /api/trainer/lease: a lease on the oldest enqueued fine-tune this trainer serves, waiting up to wait_seconds; undefined = 204. */
  async lease(trainer: TrainerIdentity, body: unknown, signal: AbortSignal) {
    const wait = isObject(body) && body.wait_seconds !== undefined ? body.wait_seconds : 0;
    if (!isCount(wait) || wait > 30) throw ApiError.badRequest('wait_seconds must be an integer between 0 and 30');
    this.listen();
    const deadline = Date.now() + wait * 1000;
    for (;;) {
      if (this.closing || signal.aborted) return undefined;
      const leased = await this.claim(trainer);
      if (leased) {
        const view = await this.leaseView(leased.lease, leased.ft);
        if (view) return view;
        continue;
      }
      const left = deadline - Date.now();
      if (left <= 0 || signal.aborted) return undefined;
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          signal.removeEventListener('abort', wake);
          this.waiting.delete(wake);
          resolve();
        };
        // No periodic look while it waits: an idle trainer costs one claim per poll. A wake-up lost
        // with Redis only delays the run to the trainer's next poll, whose first claim finds it.
        const timer = setTimeout(wake, left);
        signal.addEventListener('abort', wake, { once: true });
        this.waiting.add(wake);
      });
    }
  }

  private async claim(trainer: TrainerIdentity): Promise<{ lease: LeaseRow; ft: FineTuneRow } | undefined> {
    if (trainer.baseModels.length === 0) return undefined;
    return this.trainers.claim(trainer);
  }

  /**
   * The lease as the trainer gets it. Its dataset is the bytes pinned at tokenization (what the run
   * is charged for), whatever the branch holds now; a run whose pinned bytes are gone errors here,
   * naming them (undefined: the trainer leases the next run).
   */
  private async leaseView(lease: LeaseRow, ft: FineTuneRow) {
    const repo = await this.trainers.repositoryOf(ft.repositoryId);
    const resource = parseResource(ft.resource);
    let file: { blobKey: string; sha256: string; size: bigint } | null = null;
    if (ft.datasetBlobKey && ft.datasetSha256 && ft.datasetSize !== null) {
      file = { blobKey: ft.datasetBlobKey, sha256: ft.datasetSha256, size: ft.datasetSize };
      if (!(await this.blobs.head(file.blobKey))) {
        const ended = await this.fineTunes.inTransaction(async (tx) => {
          await this.trainers.finish(tx, lease.id);
          return this.runs.end(ft.id, ['enqueued', 'running'], 'errored', { release: true }, {
            db: tx,
            error: `The dataset ${ft.resource} as tokenized (sha256 ${file!.sha256}) is no longer stored; tokenize the fine-tune again. Nothing was charged`,
          });
        });
        if (ended) await this.runs.announce(ended);
        return undefined;
      }
    } else if (typeof resource !== 'string') {
      // Tokenized before datasets were pinned: the branch's file, as before.
      file = await this.trainers.fileOnBranch(repo.id, resource.branch, resource.path);
    }
    const last = await this.trainers.lastCheckpoint(ft.id);
    return {
      lease_id: lease.id,
      attempt: lease.attempt,
      heartbeat_seconds: this.config.TRAINER_HEARTBEAT_SECONDS,
      fine_tune: { ...toFineTuneView(ft, { namespace: repo.namespace.name, name: repo.name }), ...runFields(ft) },
      dataset: file ? { url: this.urls.url(file.blobKey), sha256: file.sha256, size_bytes: Number(file.size) } : null,
      resume_from: last ? { step: last.step, files: last.files.map((f) => ({ path: f.path, url: this.urls.url(f.blobKey), size_bytes: Number(f.sizeBytes), sha256: f.sha256 })) } : null,
    };
  }

  /** The lease, locked for this call's transaction; 404 unknown (or another trainer's), 409 once it is lost or finished. */
  private async lockLease(tx: FineTuneTx, trainer: TrainerIdentity, leaseId: string): Promise<LeaseRow> {
    const lease = UUID_PATTERN.test(leaseId) ? await this.trainers.lock(tx, leaseId) : null;
    if (!lease || lease.trainerId !== trainer.id) throw ApiError.notFound(`Lease not found: ${leaseId}`);
    if (lease.state !== 'active') throw new ApiError('invalid_state', `Lease ${leaseId} is ${lease.state}; its fine-tune is no longer this trainer's to run`);
    return lease;
  }

  /**
   * POST /api/trainer/leases/{id}/events: applies the events after the last seq seen (a repeated
   * one is ignored), counts as a heartbeat, and moves an enqueued fine-tune to running. Answers
   * whether the trainer must stop.
   */
  async events(trainer: TrainerIdentity, leaseId: string, body: unknown): Promise<{ cancel: boolean; applied: number }> {
    const events = parseTrainerEvents(body).sort((a, b) => a.seq - b.seq);
    // The hot call of the protocol (every heartbeat): the lease locked and its run read in one
    // statement, the new events in one insert, the lease's seq and heartbeat in one update.
    const { started, cancel, applied } = await this.fineTunes.inTransaction(async (tx) => {
      const locked = UUID_PATTERN.test(leaseId) ? await this.trainers.lockWithRun(tx, leaseId) : undefined;
      if (!locked || locked.trainer_id !== trainer.id) throw ApiError.notFound(`Lease not found: ${leaseId}`);
      if (locked.state !== 'active') throw new ApiError('invalid_state', `Lease ${leaseId} is ${locked.state}; its fine-tune is no longer this trainer's to run`);
      const fresh = events.filter((e, i) => e.seq > locked.last_seq && (i === 0 || e.seq !== events[i - 1].seq));
      for (const e of fresh) if (e.type === 'checkpoint') await this.seal(tx, locked.fine_tune_id, e);
      const logs = fresh.map((e) => ({ fineTuneId: locked.fine_tune_id, attempt: locked.attempt, type: e.type, data: { seq: e.seq, ...e.body } as Prisma.InputJsonValue }));
      await this.trainers.applyEvents(tx, leaseId, logs, fresh.length ? fresh[fresh.length - 1].seq : locked.last_seq);
      const started = locked.ft_state === 'enqueued' ? await this.runs.transition(locked.fine_tune_id, ['enqueued'], 'running', { startedAt: new Date() }, tx) : undefined;
      return { started, cancel: locked.stop_requested, applied: fresh.length };
    });
    if (started) await this.runs.announce(started);
    return { cancel, applied };
  }

  /** A checkpoint event seals the files uploaded for its step: it needs at least one. */
  private async seal(tx: FineTuneTx, fineTuneId: string, e: TrainerEvent): Promise<void> {
    const step = e.body.step as number;
    if (step > MAX_TRAINING_STEPS) throw ApiError.badRequest(`step must be at most ${MAX_TRAINING_STEPS}`);
    const sealed = await this.trainers.checkpointCount(tx, fineTuneId);
    if (sealed >= MAX_CHECKPOINTS_PER_RUN && !(await this.trainers.checkpointSealed(fineTuneId, step, tx)))
      throw ApiError.badRequest(`A run keeps at most ${MAX_CHECKPOINTS_PER_RUN} checkpoints; this one has ${sealed}`);
    const files = await this.trainers.checkpointFileSizes(tx, fineTuneId, step);
    if (files.length === 0) throw ApiError.badRequest(`Checkpoint ${step} has no files: upload them (PUT .../checkpoints/${step}/files/{path}) before its checkpoint event`);
    const size = files.reduce((n, f) => n + f, 0n);
    await this.trainers.seal(tx, { fineTuneId, step, metrics: (e.body.metrics ?? {}) as Prisma.InputJsonValue, sizeBytes: size });
  }

  /** PUT .../checkpoints/{step}/files/{path}: one file, streamed to the blob store, at most MAX_CHECKPOINT_BYTES. */
  async upload(trainer: TrainerIdentity, leaseId: string, stepParam: string, rawPath: string, body: unknown) {
    if (!/^\d{1,9}$/.test(stepParam)) throw ApiError.badRequest('step must be a non-negative integer');
    const step = Number(stepParam);
    if (step > MAX_TRAINING_STEPS) throw ApiError.badRequest(`step must be at most ${MAX_TRAINING_STEPS}`);
    const path = pathSegments(rawPath, 'file path').join('/');
    if (!path) throw ApiError.badRequest('The file path is empty');
    if (!body || typeof (body as Readable).pipe !== 'function') throw new ApiError('unsupported_media_type', 'Send the file as the request body with Content-Type: application/octet-stream');
    const lease = await this.fineTunes.inTransaction((tx) => this.lockLease(tx, trainer, leaseId));
    if (await this.trainers.checkpointSealed(lease.fineTuneId, step))
      throw new ApiError('invalid_state', `Checkpoint ${step} is sealed; its files cannot change`);
    const ft = await this.trainers.fineTuneWithNamespace(lease.fineTuneId);
    // The key holds a digest of the path, not the path: no file name can reach a stored blob's
    // neighbours (the local store keeps a blob's metadata at `<key>.meta`).
    const key = `${ft.namespace.name}/fine-tunes/${ft.id}/checkpoints/${step}/${createHash('sha256').update(path).digest('hex')}`;
    const max = this.config.MAX_CHECKPOINT_BYTES;
    let seen = 0;
    const bounded = new Transform({
      transform(chunk: Buffer, _enc, done) {
        seen += chunk.length;
        if (seen > max) done(new ApiError('payload_too_large', `A checkpoint file may be at most ${max} bytes (MAX_CHECKPOINT_BYTES)`));
        else done(null, chunk);
      },
    });
    (body as Readable).on('error', (err) => bounded.destroy(err));
    const stored = await this.blobs.put(key, (body as Readable).pipe(bounded), 'application/octet-stream');
    await this.trainers.saveCheckpointFile({ fineTuneId: ft.id, step, path, blobKey: stored.key, sizeBytes: BigInt(stored.size), sha256: stored.sha256 });
    await this.trainers.heartbeat(lease.id);
    return { step, path, size_bytes: stored.size, sha256: stored.sha256 };
  }

  /**
   * POST .../complete: the run ends completed (stopped, when a stop was asked), charged what the
   * trainer reports it trained; the lease is finished in the same transaction.
   */
  async complete(trainer: TrainerIdentity, leaseId: string, body: unknown) {
    if (!isObject(body)) throw ApiError.badRequest('Request body must be a JSON object');
    const { trained_tokens: tokens, trained_steps: steps, final_step: finalStep } = body;
    if (tokens === undefined && steps === undefined) throw ApiError.badRequest('Report trained_tokens or trained_steps');
    if (tokens !== undefined && !isCount(tokens)) throw ApiError.badRequest('trained_tokens must be a non-negative integer');
    if (steps !== undefined && !isCount(steps)) throw ApiError.badRequest('trained_steps must be a non-negative integer');
    if (finalStep !== undefined && !isCount(finalStep)) throw ApiError.badRequest('final_step must be a non-negative integer');
    const ended = await this.fineTunes.inTransaction(async (tx) => {
      const lease = await this.lockLease(tx, trainer, leaseId);
      await this.trainers.finish(tx, lease.id);
      const ft = (await this.fineTunes.byId(lease.fineTuneId, tx))!;
      const to = ft.stopRequestedAt ? 'stopped' : 'completed';
      const amount = { ...(tokens !== undefined && { trainedTokens: tokens as number }), ...(steps !== undefined && { trainedSteps: steps as number }) };
      return this.runs.end(lease.fineTuneId, ['enqueued', 'running'], to, { settle: amount }, { db: tx });
    });
    if (!ended) throw new ApiError('invalid_state', `The fine-tune of lease ${leaseId} has already ended`);
    await this.runs.announce(ended);
    return { fine_tune_id: ended.id, status: ended.state, credits_used: runFields(ended).credits_used };
  }

  /** POST .../fail: the run errors with the trainer's message; nothing is charged. */
  async fail(trainer: TrainerIdentity, leaseId: string, body: unknown) {
    const error = isObject(body) ? body.error : undefined;
    if (typeof error !== 'string' || error.trim() === '' || error.includes('\u0000')) throw ApiError.badRequest('error must be a non-empty string without NUL characters');
    const ended = await this.fineTunes.inTransaction(async (tx) => {
      const lease = await this.lockLease(tx, trainer, leaseId);
      await this.trainers.finish(tx, lease.id);
      return this.runs.end(lease.fineTuneId, ['enqueued', 'running'], 'errored', { release: true }, { db: tx, error: `The trainer failed: ${error}` });
    });
    if (!ended) throw new ApiError('invalid_state', `The fine-tune of lease ${leaseId} has already ended`);
    await this.runs.announce(ended);
    return { fine_tune_id: ended.id, status: ended.state };
  }

  /**
   * Leases without a call for 3 x TRAINER_HEARTBEAT_SECONDS are lost. Their fine-tune goes back
   * to enqueued (the next lease resumes from its last sealed checkpoint), is errored after
   * TRAINER_MAX_ATTEMPTS, or stopped when a stop was waiting for the trainer. Returns how many.
   */
  async sweepLost(): Promise<number> {
    const lostAfterMs = 3 * this.config.TRAINER_HEARTBEAT_SECONDS * 1000;
    const lost = await this.trainers.markLost(lostAfterMs);
    for (const { fine_tune_id: id, attempt } of lost) {
      const ft = await this.fineTunes.byId(id);
      if (!ft) continue;
      this.logger.warn(`Lease ${attempt} of fine-tune ${id} lost (no call for ${lostAfterMs / 1000} s)`);
      if (ft.stopRequestedAt) await this.runs.end(id, ['enqueued', 'running'], 'stopped', { release: true });
      else if (ft.attempt >= this.config.TRAINER_MAX_ATTEMPTS)
        await this.runs.end(id, ['enqueued', 'running'], 'errored', { release: true }, { error: `The run lost its trainer ${ft.attempt} times (TRAINER_MAX_ATTEMPTS); nothing was charged` });
      else if (await this.runs.transition(id, ['running', 'enqueued'], 'enqueued', { enqueuedAt: new Date() }))
        await this.bus.publish(FINE_TUNE_ENQUEUED_CHANNEL, { fineTuneId: id, baseModel: ft.baseModel }).catch(() => undefined);
    }
    return lost.length;
  }
}
