import { Inject, Injectable, Logger } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { nowOrOnceBack } from '@atelier/runtime';
import { BatchedCreditLedger } from './batched-credit-ledger.service';
import type { Reservation } from './credit-ledger.service';

/**
 * Every kind of paid request and the prefix of its reservations' references. The stale sweep of
 * a kind is keyed by its prefix, so a reference must start with one of these.
 */
export const PAID_REQUEST_KINDS = { chat: 'chat:', media: 'media:', generation: 'generation:' } as const;
export type PaidRequestKind = keyof typeof PAID_REQUEST_KINDS;

export function reservationReference(kind: PaidRequestKind, ...parts: string[]): string {
  return PAID_REQUEST_KINDS[kind] + parts.join(':');
}

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
    @Inject(APP_CONFIG) private readonly config: Pick<AppConfig, 'RESERVATION_GRACE_MS'>,
  ) {}

  /** Reserves `estimate` credits for one request, or throws the ledger's 402. */
  reserve(namespaceId: string, estimate: string, reference: string): Promise<Reservation> {
    return this.ledger.reserve(namespaceId, estimate, reference);
  }

  /** Reservations for several units of one request (num_generations), all or none; 402 otherwise. */
  reserveMany(namespaceId: string, items: { amount: string; reference: string }[]): Promise<Reservation[]> {
    return this.ledger.reserveMany(namespaceId, items);
  }

  /**
   * Settles the delivered cost, or releases the reservation when `cost` is null (nothing was
   * delivered), then calls `onClosed` once with what was charged. Never throws and never holds
   * up an answer for an outage: when Postgres is away it resolves at once, the same idempotent
   * step is retried in the background for most of RESERVATION_GRACE_MS, and `onClosed` follows
   * when it lands. A step that fails for good leaves the reservation open (credits held,
   * nothing charged, `onClosed('0')`) for the stale sweep to release.
   */
  async close(reservation: Reservation, cost: string | null, onClosed: (charged: string) => void = () => undefined): Promise<void> {
    const step = async (): Promise<string> => {
      if (cost === null) {
        await this.ledger.release(reservation.id);
        return '0';
      }
      return (await this.ledger.settle(reservation, cost)).charged;
    };
    const charged = await nowOrOnceBack(step, {
      maxWaitMs: Math.floor(this.config.RESERVATION_GRACE_MS * 0.8),
      onWait: (service) => this.logger.warn(`${service} unavailable; reservation ${reservation.id} will be closed when it is back`),
      onLater: onClosed,
      onFailure: (err) => {
        this.logger.error(`Could not close credit reservation ${reservation.id}: ${(err as Error).message}`);
        onClosed('0');
      },
    });
    if (charged !== undefined) onClosed(charged);
  }
}
