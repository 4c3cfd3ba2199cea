import { Injectable, Logger } from '@nestjs/common';
import { CreditLedger, PaidRequests, chargeTags, reservationReference, type Payer, type StaleReservationRule, PAID_REQUEST_KINDS } from '@atelier/billing';
import { ApiError, FINE_TUNE_ENQUEUED_CHANNEL, USER_EVENTS_CHANNEL, WEBHOOK_DELIVERY_QUEUE } from '@atelier/contracts';
import { requestContext } from '@atelier/observability';
import { Prisma } from '@atelier/db';
import { BroadcastBus, JobQueues, UserEventLog } from '@atelier/runtime';
import type { RepositoryRecord } from '@atelier/repos';
import { baseModelSpec } from './base-models';
import type { FineTuneState } from './fine-tune-states';
import type { TokenizationStats } from './tokenize-dataset';
import { findFineTune, runFields } from './fine-tunes.service';
import { FineTunesRepository, type FineTuneChanges, type FineTuneRow, type FineTuneTx } from './fine-tunes.repository';

/** The optional `webhook` of a run's body: an absolute http(s) URL, or a 400. */
export function parseRunWebhook(body: unknown): string | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body !== 'object' || Array.isArray(body)) throw ApiError.badRequest('Request body must be a JSON object');
  const webhook = (body as Record<string, unknown>).webhook;
  if (webhook === undefined || webhook === null) return undefined;
  let url: URL | undefined;
  try {
    url = typeof webhook === 'string' && webhook.length <= 2048 ? new URL(webhook) : undefined;
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) throw ApiError.badRequest('webhook must be an absolute http(s) URL of at most 2048 characters');
  return url.toString();
}

/** What the trainer reports at the end of a run (complete, or after a cancel). */
export interface TrainedAmount {
  trainedTokens?: number;
  trainedSteps?: number;
}

/**
 * The price of what a run trained: tokens at the base model's price per million, or steps at its
 * price per step. Never more than the run reserved: a trainer cannot bill beyond the estimate the
 * user agreed to when it started the run.
 */
export function trainedCost(baseModel: string, amount: TrainedAmount, reserved: string): string {
  const spec = baseModelSpec(baseModel);
  let cost = new Prisma.Decimal(0);
  if (spec && 'per_million_tokens' in spec.price && amount.trainedTokens !== undefined)
    cost = new Prisma.Decimal(spec.price.per_million_tokens).mul(amount.trainedTokens).div(1_000_000);
  else if (spec && 'per_step' in spec.price && amount.trainedSteps !== undefined) cost = new Prisma.Decimal(spec.price.per_step).mul(amount.trainedSteps);
  const cap = new Prisma.Decimal(reserved);
  return (cost.gt(cap) ? cap : cost).toDecimalPlaces(6, Prisma.Decimal.ROUND_HALF_UP).toFixed();
}

/**
 * A fine-tune's run: run and stop, and every transition after tokenized, as conditional updates
 * that name the states they leave (a late or duplicate caller never overwrites a later state).
 * The run reserves its estimate through the one paid-request lifecycle; its end settles what was
 * trained (completed, stopped) or releases it all (errored, stopped before a step). Each
 * transition goes to the owner's event stream as `fine_tune.status`.
 */
@Injectable()
export class FineTuneRuns {
  private readonly logger = new Logger(FineTuneRuns.name);

  constructor(
    private readonly fineTunes: FineTunesRepository,
    private readonly paid: PaidRequests,
    private readonly ledger: CreditLedger,
    private readonly bus: BroadcastBus,
    private readonly events: UserEventLog,
    private readonly queues: JobQueues,
  ) {}

  find(repo: RepositoryRecord, id: string): Promise<FineTuneRow> {
    return findFineTune(this.fineTunes, repo, id);
  }

  /**
   * POST .../actions/run. From `tokenized`: reserves the estimate (402 without the credits) and
   * enqueues. From `created` or `tokenizing`: marks the run as wanted; tokenization starts if it
   * has not, and its end enqueues (or errors the fine-tune, naming the shortfall, when the
   * credits are not there then). Anything else: 409 naming the current state.
   */
  async run(repo: RepositoryRecord, id: string, payer: Payer, startTokenization: () => Promise<unknown>, body: unknown = {}): Promise<FineTuneRow> {
    const webhookUrl = parseRunWebhook(body);
    const ft = await this.find(repo, id);
    if (ft.state === 'created' || ft.state === 'tokenizing') {
      const marked = await this.fineTunes.updateInStates(id, ['created', 'tokenizing'], { runRequested: true, ...(webhookUrl && { webhookUrl }) });
      if (!marked) return this.run(repo, id, payer, startTokenization, body);
      if (ft.state === 'created') await startTokenization().catch((err: unknown) => {
        // Another request started it meanwhile: the run is still wanted.
        if (!(err instanceof ApiError && err.type === 'invalid_state')) throw err;
      });
      // Tokenization may already have finished (and enqueued it) by now.
      const now = await this.find(repo, id);
      if (now.state === 'tokenized') return this.enqueue(now, payer);
      return now;
    }
    if (ft.state !== 'tokenized')
      throw new ApiError('invalid_state', `Fine-tune ${id} is in state '${ft.state}'; it can be run from 'created', 'tokenizing' or 'tokenized'`);
    if (webhookUrl) await this.fineTunes.updateInStates(id, ['tokenized'], { webhookUrl });
    return this.enqueue({ ...ft, webhookUrl: webhookUrl ?? ft.webhookUrl }, payer);
  }

  /** tokenized -> enqueued with the run's reservation; 402 (and still tokenized) without the credits. */
  async enqueue(ft: FineTuneRow, payer: Payer): Promise<FineTuneRow> {
    const stats = ft.tokenization as TokenizationStats | null;
    const estimate = stats?.estimated_cost ?? '0';
    const reference = reservationReference('fineTune', ft.id, String(Date.now()));
    // A run is not a request in flight: it counts against credits and the key's budget, not max_concurrent.
    const { concurrency: _slots, ...tags } = chargeTags(payer, ft.baseModel, '/api/repos/fine_tunes/actions/run');
    const reservation = await this.paid.reserveMany(payer.namespaceId, [{ amount: estimate, reference }], tags);
    const moved = await this.transition(ft.id, ['tokenized'], 'enqueued', { reservationId: reservation[0].id, enqueuedAt: new Date(), runRequested: false });
    if (!moved) {
      await this.ledger.release(reservation[0].id).catch(() => false);
      const now = await this.fineTunes.byId(ft.id);
      if (!now) throw ApiError.notFound(`Fine-tune not found: ${ft.id}`);
      if (now.state === 'enqueued') return now;
      throw new ApiError('invalid_state', `Fine-tune ${ft.id} is in state '${now.state}'; it can be run from 'created', 'tokenizing' or 'tokenized'`);
    }
    await this.bus.publish(FINE_TUNE_ENQUEUED_CHANNEL, { fineTuneId: ft.id, baseModel: ft.baseModel }).catch(() => undefined);
    return moved;
  }

  /**
   * Tokenization ended with the run wanted: enqueue as its creator, or error the fine-tune with
   * the reason (no credits) so the owner sees why it did not start.
   */
  async enqueueAfterTokenization(id: string): Promise<void> {
    const ft = await this.fineTunes.byIdWithNamespace(id);
    if (!ft || ft.state !== 'tokenized' || !ft.runRequested) return;
    const payer: Payer = { namespaceId: ft.namespaceId, namespace: ft.namespace.name, keyPrefix: 'fine-tune' };
    try {
      await this.enqueue(ft, payer);
    } catch (err) {
      if (err instanceof ApiError && err.status === 402) await this.transition(id, ['tokenized'], 'errored', { errorMessage: `The run could not start: ${err.message}`, runRequested: false });
      else throw err;
    }
  }

  /**
   * POST .../actions/stop. enqueued -> stopped at once (released); running: the request is
   * recorded, the trainer is told on its next call and confirms with `complete`, or its lease runs
   * out. Anything else: 409.
   */
  async stop(repo: RepositoryRecord, id: string): Promise<FineTuneRow> {
    const ft = await this.find(repo, id);
    if (ft.state !== 'enqueued' && ft.state !== 'running')
      throw new ApiError('invalid_state', `Fine-tune ${id} is in state '${ft.state}'; only an enqueued or running fine-tune can be stopped`);
    if (ft.state === 'enqueued') {
      // No trainer holds it: stopped now. One that does (leased, not yet started) is told below.
      const stopped = await this.end(id, ['enqueued'], 'stopped', { release: true }, { skipIfLeased: true });
      if (stopped) return stopped;
    }
    const asked = await this.fineTunes.inTransaction(async (tx) => {
      if (!(await this.fineTunes.updateInStates(id, ['running', 'enqueued'], { stopRequestedAt: new Date() }, tx))) return undefined;
      const row = (await this.fineTunes.byId(id, tx))!;
      await this.record(tx, row);
      return row;
    });
    if (asked) {
      await this.announce(asked);
      return asked;
    }
    const now = await this.find(repo, id);
    // Ended meanwhile (its trainer completed, or another stop won): what it is now.
    if (now.state === 'stopped') return now;
    throw new ApiError('invalid_state', `Fine-tune ${id} is in state '${now.state}'; only an enqueued or running fine-tune can be stopped`);
  }

  /**
   * Moves a fine-tune from one of `from` to `to` with `data`, and announces it; undefined when
   * it was in none of them (someone else moved it first).
   */
  async transition(id: string, from: FineTuneState[], to: FineTuneState, data: FineTuneChanges = {}, db?: FineTuneTx): Promise<FineTuneRow | undefined> {
    const work = async (tx: FineTuneTx) => {
      if (!(await this.fineTunes.updateInStates(id, from, { ...data, state: to }, tx))) return undefined;
      const row = (await this.fineTunes.byId(id, tx))!;
      // Its event commits with it (the outbox); the caller's transaction publishes it after its commit (announce).
      await this.record(tx, row);
      return row;
    };
    if (db) return work(db);
    const row = await this.fineTunes.inTransaction(work);
    if (row) await this.announce(row);
    return row;
  }

  /**
   * Ends a run: to `to` from one of `from`, settling `settle` (what was trained) or releasing the
   * reservation, in one transaction with the transition, so a run is never charged twice.
   * skipIfLeased: only while no trainer holds a lease (a stop of an enqueued run racing a lease).
   */
  async end(
    id: string,
    from: FineTuneState[],
    to: FineTuneState,
    money: { release: true } | { settle: TrainedAmount },
    opts: { error?: string; skipIfLeased?: boolean; db?: FineTuneTx } = {},
  ): Promise<FineTuneRow | undefined> {
    const work = async (tx: FineTuneTx) => {
      if (!(await this.fineTunes.lockInStates(tx, id, from, opts.skipIfLeased))) return undefined;
      const ft = (await this.fineTunes.byId(id, tx))!;
      let credits: string | null = ft.creditsUsed === null ? null : ft.creditsUsed.toString();
      if (ft.reservationId) {
        const reserved = await this.fineTunes.reservationAmount(tx, ft.reservationId);
        if ('settle' in money && reserved !== undefined) {
          const cost = trainedCost(ft.baseModel, money.settle, reserved);
          credits = (await this.ledger.settle(ft.reservationId, cost, tx)).charged;
        } else {
          await this.ledger.release(ft.reservationId, tx);
          credits = '0';
        }
      }
      const amount = 'settle' in money ? money.settle : {};
      const ended = await this.fineTunes.update(tx, id, {
        state: to,
        finishedAt: new Date(),
        creditsUsed: credits,
        ...(amount.trainedTokens !== undefined && { trainedTokens: BigInt(amount.trainedTokens) }),
        ...(amount.trainedSteps !== undefined && { trainedSteps: amount.trainedSteps }),
        ...(opts.error !== undefined && { errorMessage: opts.error.slice(0, 2000) }),
      });
      await this.record(tx, ended);
      return ended;
    };
    const row = opts.db ? await work(opts.db) : await this.fineTunes.inTransaction(work);
    if (!row) return undefined;
    if (!opts.db) await this.announce(row);
    return row;
  }

  /** The event of a transition (or a stop request), in the transaction that makes it: the outbox. */
  private async record(tx: FineTuneTx, ft: FineTuneRow): Promise<void> {
    const names = await this.fineTunes.repositoryNames(tx, ft.repositoryId);
    const data = {
      id: ft.id,
      name: ft.name,
      namespace: names?.namespace ?? null,
      repo_name: names?.repo ?? null,
      base_model: ft.baseModel,
      status: ft.state,
      error: ft.errorMessage,
      ...runFields(ft),
      updated_at: Math.floor(ft.updatedAt.getTime() / 1000),
    };
    // One message id per state and attempt (and stop request): a repeated publication is the same message.
    const webhookId = ft.webhookUrl ? `msg_${ft.id.replace(/-/g, '')}_${ft.state}_${ft.attempt}${ft.stopRequestedAt ? '_stop' : ''}` : null;
    await this.fineTunes.recordEvent(tx, { fineTuneId: ft.id, userId: ft.createdById, data, webhookUrl: ft.webhookUrl, webhookId });
  }

  /** Publishes the fine-tune's recorded events (right after the transition commits). Never throws: the sweeper retries. */
  async announce(ft: FineTuneRow): Promise<void> {
    await this.publishPending(ft.id).catch((err: Error) => this.logger.warn(`fine_tune.status of ${ft.id} (${ft.state}) not published yet (${err.message}); the sweeper will`));
  }

  /**
   * Publishes a fine-tune's unpublished events in order: to the owner's stream as
   * `fine_tune.status` (retained first, so the SSE id is its id in the owner's log), and as a
   * signed webhook message when the run was given one. Published again (the sweeper), an event keeps
   * the id its first append got. Rows are claimed with SKIP LOCKED.
   */
  async publishPending(fineTuneId: string): Promise<void> {
    await this.fineTunes.publishEvents(fineTuneId, async (row) => {
      const outboxId = String(row.id);
      const payload = { userId: row.user_id, type: 'fine_tune.status' as const, data: row.data, outboxId };
      const eventId = await this.events.append(row.user_id, payload, `fine-tune:${outboxId}`);
      await this.bus.publish(USER_EVENTS_CHANNEL, { userId: row.user_id, type: 'fine_tune.status', data: row.data, event_id: eventId });
      if (row.webhook_url && row.webhook_id) await this.queueWebhook(fineTuneId, row.webhook_url, row.webhook_id, row.data);
    });
  }

  /** Events a process recorded and died before publishing: published again after `olderThanMs`. */
  async publishStranded(olderThanMs: number, limit = 100): Promise<number> {
    const stranded = await this.fineTunes.withStrandedEvents(olderThanMs, limit);
    for (const id of stranded) await this.publishPending(id);
    return stranded.length;
  }

  /** A transition as a signed webhook message (the queue-worker delivers and retries it, as generations' messages). */
  private async queueWebhook(fineTuneId: string, url: string, webhookId: string, data: Record<string, unknown>): Promise<void> {
    const namespaceId = await this.fineTunes.namespaceIdOf(fineTuneId);
    if (!namespaceId) return;
    await this.queues.add(
      WEBHOOK_DELIVERY_QUEUE,
      {
        webhookId,
        fineTuneId,
        namespaceId,
        type: 'fine_tune.status',
        url,
        timestamp: new Date().toISOString(),
        data,
        attempt: 1,
        requestId: requestContext.current()?.requestId ?? fineTuneId,
      },
      { jobId: `${webhookId}.1` },
    );
  }
}

/**
 * Run reservations are owned by their fine-tune while it is enqueued or running (its end settles
 * or releases them); only those no such fine-tune refers to are stale.
 */
export function fineTuneReservationRule(fineTunes: FineTunesRepository, maxAgeMs: number): StaleReservationRule {
  return { prefix: PAID_REQUEST_KINDS.fineTune, maxAgeMs, inUse: (ids) => fineTunes.reservationsInUse(ids) };
}
