import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { abortFollowing, ConcurrencyLimiter, nowOrOnceBack } from '@atelier/runtime';
import { BatchedCreditLedger } from './batched-credit-ledger.service';
import { ApiError } from '@atelier/contracts';
import { Metrics, timedStage } from '@atelier/observability';
import type { ChargeTags, DeliveredUsage, NamedConcurrencyLimit, Reservation } from './credit-ledger.service';

/**
 * Every kind of paid request and the prefix of its reservations' references. The stale sweep of
 * a kind is keyed by its prefix, so a reference must start with one of these.
 */
export const PAID_REQUEST_KINDS = { chat: 'chat:', media: 'media:', generation: 'generation:', fineTune: 'fine-tune:', batch: 'batch:' } as const;
export type PaidRequestKind = keyof typeof PAID_REQUEST_KINDS;

export function reservationReference(kind: PaidRequestKind, ...parts: string[]): string {
  return PAID_REQUEST_KINDS[kind] + parts.join(':');
}

/**
 * What a request's reservation records about who made it and what for (usage by key, model and
 * endpoint), and whether its key's budget must hold it too.
 */
export function chargeTags(payer: Payer, model: string, endpoint: string): ChargeTags {
  const concurrency: NamedConcurrencyLimit[] = [];
  if (payer.maxConcurrent !== undefined) concurrency.push({ key: `key:${payer.keyPrefix}`, limit: payer.maxConcurrent, name: `API key ${payer.keyPrefix}` });
  if (payer.namespaceMaxConcurrent !== undefined)
    concurrency.push({ key: `ns:${payer.namespaceId}`, limit: payer.namespaceMaxConcurrent, name: `namespace ${payer.namespace}` });
  if (payer.makerLimits)
    for (const maker of payer.makerLimits)
      if (maker.maxConcurrent !== undefined) concurrency.push({ key: `key:${maker.keyPrefix}`, limit: maker.maxConcurrent, name: `API key ${maker.keyPrefix}, which made this key` });
  return {
    apiKeyId: payer.keyId,
    ...(payer.hasBudget && payer.keyId && { budgetOf: payer.keyPrefix }),
    model,
    endpoint,
    ...(concurrency.length > 0 && { concurrency }),
  };
}

/** The caller as billing sees it (the auth lib's Caller has these fields). */
export interface Payer {
  keyId?: string;
  keyPrefix: string;
  hasBudget?: boolean;
  namespaceId: string;
  namespace: string;
  maxConcurrent?: number;
  namespaceMaxConcurrent?: number;
  /** The max_concurrent limits of the keys that made this one: its work counts against them too. */
  makerLimits?: readonly { keyPrefix: string; maxConcurrent?: number }[];
}

/** How long a queued generation's slot lasts if its release is lost and nobody checks it (ConcurrencyLimiter). */
const GENERATION_SLOT_LEASE_MS = 24 * 3600_000;

/**
 * How long a synchronous request's reservation can legitimately stay open: the longest the
 * gateway waits for the answer, plus the grace its settle may spend waiting out an outage.
 */
export function syncReservationMaxAgeMs(config: Pick<AppConfig, 'RPC_TIMEOUT_MS' | 'RESERVATION_GRACE_MS'>): number {
  return config.RPC_TIMEOUT_MS + config.RESERVATION_GRACE_MS;
}

/**
 * The one lifecycle of a paid request: reserve an upper bound of the price (from parameters that
 * passed validation) before any work; hand the work off; then settle what was delivered, or
 * release the reservation when nothing was. A crash anywhere in between leaves the reservation
 * open and never charged, and the stale-reservation sweep of its kind gives it back.
 */
@Injectable()
export class PaidRequests {
  private readonly logger = new Logger(PaidRequests.name);

  constructor(
    private readonly ledger: BatchedCreditLedger,
    @Inject(APP_CONFIG) private readonly config: Pick<AppConfig, 'RESERVATION_GRACE_MS' | 'RPC_TIMEOUT_MS'>,
    private readonly slots: ConcurrencyLimiter,
    @Optional() private readonly metrics?: Metrics,
  ) {}

  /**
   * Reserves `estimate` credits for one request whose max_concurrent slots (if any) are taken, or
   * throws the ledger's 402 (credits, or the key's budget when `tags.budgetOf` says it has one),
   * freeing the slots again.
   */
  private async reserveHoldingSlot(namespaceId: string, estimate: string, reference: string, tags: ChargeTags, id?: string): Promise<Reservation> {
    try {
      const reservation = await this.ledger.reserve(namespaceId, estimate, reference, tags, id);
      return tags.concurrency?.length ? { ...reservation, holdsSlot: true } : reservation;
    } catch (err) {
      await this.freeSlots(tags, [reference]);
      throw err;
    }
  }

  /**
   * Reserves `estimate` for one request (as reserve) and starts the work it pays for, which
   * `start` begins with the signal to pass on. Normally one after the other. When the
   * reservation is all but certain (mayOverlap), at the same time, so the caller waits for the
   * longer of the two instead of their sum: the work must then not reach the client before this
   * resolves. A refusal then aborts the work's signal (the call is cancelled wherever it runs,
   * atelier_overlapped_refusals_total counts it) and rejects with the ledger's 402, and the
   * work's own rejection is left for nobody. max_concurrent slots are always taken before the
   * work starts, so a 429 never follows work begun. `admitted`: the caller's own admission check
   * already under way (chat's tokens per minute), awaited together with the slots, so the two
   * Redis calls cost one round trip; if it refuses, slots taken meanwhile are given back. The
   * reservation is timed as `stage`, or as `<stage>_overlapped` when it ran beside the work (its
   * slots, taken before, as `<stage>_slots`).
   */
  async reserveAndStart<T>(
    namespaceId: string,
    estimate: string,
    reference: string,
    tags: ChargeTags,
    opts: { stage: string; signal: AbortSignal; id?: string; admitted?: Promise<unknown> },
    start: (signal: AbortSignal) => Promise<T>,
  ): Promise<{ reservation: Reservation; work: Promise<T> }> {
    const admit = () => this.admit(tags, reference, syncReservationMaxAgeMs(this.config), opts.admitted);
    if (!this.mayOverlap(namespaceId, estimate, tags)) {
      const reserving = async () => {
        await admit();
        return this.reserveHoldingSlot(namespaceId, estimate, reference, tags, opts.id);
      };
      const reservation = await timedStage(this.metrics, opts.stage, reserving);
      return { reservation, work: start(opts.signal) };
    }
    if (tags.concurrency?.length) await timedStage(this.metrics, `${opts.stage}_slots`, admit);
    else await opts.admitted;
    // Aborted by the caller's signal or by a refusal; the caller's signal ends with its request.
    const { controller: refused } = abortFollowing(opts.signal);
    const work = start(refused.signal);
    work.catch(() => undefined);
    try {
      return { reservation: await timedStage(this.metrics, `${opts.stage}_overlapped`, () => this.reserveHoldingSlot(namespaceId, estimate, reference, tags, opts.id)), work };
    } catch (err) {
      refused.abort();
      this.metrics?.overlapRefusals.inc();
      throw err;
    }
  }

  /**
   * Whether work may start while its reservation is still being taken: only when the
   * reservation is all but certain, so work is hardly ever done for a request then refused:
   * where this process has lately seen the namespace with ample credits, and the key's budget,
   * if it has one, with ample room (BatchedCreditLedger.coversAtOnce). A budget near its end
   * therefore reserves first, as every refusal there is an everyday outcome.
   */
  private mayOverlap(namespaceId: string, estimate: string, tags: ChargeTags): boolean {
    return this.ledger.coversAtOnce(namespaceId, estimate, tags.budgetOf !== undefined ? tags.apiKeyId : undefined);
  }

  /**
   * Reservations for several units of one request (num_generations), all or none; 402 otherwise.
   * Each unit is a queued generation: its max_concurrent slot is held until the generation ends
   * (GenerationState releases it by its reference).
   */
  async reserveMany(namespaceId: string, items: { amount: string; reference: string }[], tags: ChargeTags): Promise<Reservation[]> {
    const members = items.map((i) => i.reference);
    await this.takeSlots(tags, members, GENERATION_SLOT_LEASE_MS);
    try {
      return await this.ledger.reserveMany(namespaceId, items, tags);
    } catch (err) {
      await this.freeSlots(tags, members);
      throw err;
    }
  }

  /** Gives back max_concurrent slots of work that has ended (by reservation reference). Never throws. */
  async endWork(references: string[]): Promise<void> {
    await this.slots.release(references).catch(() => undefined);
  }

  /** takeSlots and the caller's `admitted` together; a refusal of either gives back the slots taken. */
  private async admit(tags: ChargeTags, reference: string, leaseMs: number, admitted?: Promise<unknown>): Promise<void> {
    if (!admitted) return this.takeSlots(tags, [reference], leaseMs);
    const [slots, other] = await Promise.allSettled([this.takeSlots(tags, [reference], leaseMs), admitted]);
    if (other.status === 'rejected') {
      if (slots.status === 'fulfilled') await this.freeSlots(tags, [reference]);
      throw other.reason;
    }
    if (slots.status === 'rejected') throw slots.reason;
  }

  /**
   * 429 when a max_concurrent limit is full. While Redis is away limits are not enforced (as
   * rate limits), rather than refusing every request.
   */
  private async takeSlots(tags: ChargeTags, members: string[], leaseMs: number): Promise<void> {
    const limits = tags.concurrency;
    if (!limits?.length) return;
    const decision = await this.slots.acquire(limits, members, leaseMs).catch(() => ({ allowed: true as const, refusedBy: undefined }));
    if (decision.allowed) return;
    const limit = limits[decision.refusedBy!];
    throw new ApiError(
      'rate_limited',
      `Concurrency limit reached: ${limit.limit} request(s) or generation(s) in flight at once for ${limit.name}; retry when one finishes`,
      { limit: 'max_concurrent', max_concurrent: limit.limit, in_flight: decision.held },
    );
  }

  private async freeSlots(tags: ChargeTags, members: string[]): Promise<void> {
    if (tags.concurrency?.length) await this.endWork(members);
  }

  /**
   * Settles the delivered cost, or releases the reservation when `cost` is null (nothing was
   * delivered), writing `usage` (and the request's record in it) on the reservation in the same
   * statement. Never throws and never holds up an answer for an outage: when Postgres is away it
   * resolves at once, and the same idempotent step is retried in the background for most of
   * RESERVATION_GRACE_MS. A step that fails for good leaves the reservation open (credits held,
   * nothing charged, no record) for the stale sweep to release.
   */
  async close(reservation: Reservation, cost: string | null, usage?: DeliveredUsage): Promise<void> {
    // The work has ended (delivered or not): its max_concurrent slot is free before billing lands.
    if (reservation.holdsSlot) void this.endWork([reservation.reference]);
    const step = async (): Promise<void> => {
      if (cost === null) await this.ledger.release(reservation.id, usage?.request);
      else await this.ledger.settle(reservation, cost, usage);
    };
    await nowOrOnceBack(step, {
      maxWaitMs: Math.floor(this.config.RESERVATION_GRACE_MS * 0.8),
      onWait: (service) => this.logger.warn(`${service} unavailable; reservation ${reservation.id} will be closed when it is back`),
      onFailure: (err) => this.logger.error(`Could not close credit reservation ${reservation.id}: ${(err as Error).message}`),
    });
  }
}
