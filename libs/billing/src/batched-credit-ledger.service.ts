import { randomUUID } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import { DECIMAL_PATTERN } from '@atelier/contracts';
import { Prisma, PrismaService } from '@atelier/db';
import { CreditLedger, type Reservation, type Settlement } from './credit-ledger.service';

const MAX_BATCH = 256;

interface Pending<I, R> {
  input: I;
  resolve: (value: R) => void;
  reject: (err: unknown) => void;
}

/** Calls of one kind for one namespace: at most one statement in flight, the rest wait and go together. */
class Lane<I, R> {
  private queue: Pending<I, R>[] = [];
  private running = false;

  constructor(
    private readonly run: (batch: Pending<I, R>[]) => Promise<void>,
    private readonly onIdle: () => void,
  ) {}

  push(input: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ input, resolve, reject });
      if (!this.running) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.running = true;
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, MAX_BATCH);
      try {
        await this.run(batch);
      } catch (err) {
        for (const p of batch) p.reject(err);
      }
    }
    this.running = false;
    this.onIdle();
  }
}

interface ReserveInput {
  namespaceId: string;
  amount: string;
  reference: string;
}

interface SettleInput {
  reservation: Reservation;
  actual: string;
}

/**
 * CreditLedger with group commit for hot namespaces. Every reserve and settle of a namespace
 * locks its one row, so on their own they run one Postgres commit at a time (bench:credits:
 * a few hundred cycles per second). Here, calls that arrive while a statement for the same
 * namespace is in flight wait for it and then go to Postgres together, as ONE statement.
 *
 * The guarantees are CreditLedger's, statement for statement:
 * - never overspend: a batch of reservations is accepted in arrival order as long as the
 *   running total fits what the namespace can spend, on the row locked by that statement;
 *   anything refused is retried alone through CreditLedger.reserve (exact 402 message);
 * - never charge twice: a batch settles only reservations still `open`, under their row
 *   locks, exactly like CreditLedger.settle, so a retried or concurrent settle finds nothing;
 * - crash safety: each call resolves only after the statement holding it has committed, so
 *   whatever a caller was told is durable; a crash loses only calls not yet answered, as
 *   before (their reservations stay open, never charged).
 * A batch of one, a charge above its reservation (capped at what the namespace can pay) and
 * any batch statement that fails use CreditLedger itself.
 */
@Injectable()
export class BatchedCreditLedger {
  private readonly logger = new Logger(BatchedCreditLedger.name);
  private readonly reserveLanes = new Map<string, Lane<ReserveInput, Reservation>>();
  private readonly settleLanes = new Map<string, Lane<SettleInput, Settlement>>();

  constructor(
    private readonly ledger: CreditLedger,
    private readonly prisma: PrismaService,
  ) {}

  reserve(namespaceId: string, amount: string, reference: string): Promise<Reservation> {
    if (!DECIMAL_PATTERN.test(amount)) return this.ledger.reserve(namespaceId, amount, reference);
    return this.lane(this.reserveLanes, namespaceId, (batch) => this.reserveBatch(namespaceId, batch)).push({ namespaceId, amount, reference });
  }

  settle(reservation: Reservation, actual: string): Promise<Settlement> {
    if (!DECIMAL_PATTERN.test(actual)) return this.ledger.settle(reservation.id, actual);
    return this.lane(this.settleLanes, reservation.namespaceId, (batch) => this.settleBatch(reservation.namespaceId, batch)).push({ reservation, actual });
  }

  /** Releases are rare (failures, cancels); they go straight to the ledger. */
  release(reservationId: string): Promise<boolean> {
    return this.ledger.release(reservationId);
  }

  private lane<I, R>(lanes: Map<string, Lane<I, R>>, namespaceId: string, run: (batch: Pending<I, R>[]) => Promise<void>): Lane<I, R> {
    let lane = lanes.get(namespaceId);
    if (!lane) {
      // A lane is dropped once drained, so the map only holds namespaces with calls in flight.
      lane = new Lane<I, R>(run, () => lanes.delete(namespaceId));
      lanes.set(namespaceId, lane);
    }
    return lane;
  }

  private async one<T>(p: Pending<unknown, T>, call: () => Promise<T>): Promise<void> {
    try {
      p.resolve(await call());
    } catch (err) {
      p.reject(err);
    }
  }

  private async reserveBatch(namespaceId: string, batch: Pending<ReserveInput, Reservation>[]): Promise<void> {
    const single = (p: Pending<ReserveInput, Reservation>) => this.one(p, () => this.ledger.reserve(namespaceId, p.input.amount, p.input.reference));
    if (batch.length === 1) return single(batch[0]);
    const ids = batch.map(() => randomUUID());
    let accepted: Set<string>;
    try {
      const rows = await this.prisma.$queryRaw<{ id: string }[]>`
        WITH req AS (
          SELECT r.id, r.amount, r.reference, r.ord
          FROM unnest(${ids}::uuid[], ${batch.map((p) => p.input.amount)}::numeric[], ${batch.map((p) => p.input.reference)}::text[])
            WITH ORDINALITY AS r(id, amount, reference, ord)
        ), ns AS (
          SELECT id, credits - reserved AS available FROM namespaces WHERE id = ${namespaceId}::uuid FOR UPDATE
        ), acc AS (
          SELECT q.id, q.amount, q.reference
          FROM (SELECT req.*, sum(req.amount) OVER (ORDER BY req.ord) AS running FROM req) q, ns
          WHERE q.running <= ns.available
        ), upd AS (
          UPDATE namespaces n SET reserved = n.reserved + (SELECT sum(amount) FROM acc)
          WHERE n.id = ${namespaceId}::uuid AND EXISTS (SELECT 1 FROM acc)
          RETURNING n.id
        )
        INSERT INTO credit_reservations (id, namespace_id, amount, reference, status)
        SELECT acc.id, upd.id, acc.amount, acc.reference, 'open' FROM acc, upd
        RETURNING id::text AS id`;
      accepted = new Set(rows.map((r) => r.id));
    } catch (err) {
      this.logger.warn(`Batched reserve of ${batch.length} failed (${(err as Error).message}); reserving one by one`);
      await Promise.all(batch.map(single));
      return;
    }
    const refused: Pending<ReserveInput, Reservation>[] = [];
    batch.forEach((p, i) => {
      if (accepted.has(ids[i])) p.resolve({ id: ids[i], namespaceId, amount: new Prisma.Decimal(p.input.amount).toFixed() });
      else refused.push(p);
    });
    // The batch stops at the first reservation that does not fit; smaller ones after it may
    // still fit, and the ledger gives the refused ones their exact 402.
    for (const p of refused) await single(p);
  }

  private async settleBatch(namespaceId: string, batch: Pending<SettleInput, Settlement>[]): Promise<void> {
    const single = (p: Pending<SettleInput, Settlement>) => this.one(p, () => this.ledger.settle(p.input.reservation.id, p.input.actual));
    // A charge above its reservation needs the ledger's cap at what the namespace can pay.
    const within = batch.filter((p) => !new Prisma.Decimal(p.input.actual).greaterThan(p.input.reservation.amount));
    const beyond = batch.filter((p) => !within.includes(p));
    if (within.length <= 1) {
      await Promise.all(batch.map(single));
      return;
    }
    let charged: Map<string, string>;
    try {
      const rows = await this.prisma.$queryRaw<{ id: string; charged: string }[]>`
        WITH req AS (
          SELECT r.id, r.actual, r.ord
          FROM unnest(${within.map((p) => p.input.reservation.id)}::uuid[], ${within.map((p) => p.input.actual)}::numeric[])
            WITH ORDINALITY AS r(id, actual, ord)
        ), cur AS (
          SELECT c.id AS rid, c.amount, LEAST(GREATEST(req.actual, 0), c.amount) AS charge, req.ord
          FROM credit_reservations c JOIN req ON req.id = c.id
          WHERE c.status = 'open' AND c.namespace_id = ${namespaceId}::uuid
          FOR UPDATE OF c
        ), closed AS (
          UPDATE credit_reservations c SET status = 'settled', closed_at = now(), charged = cur.charge
          FROM cur WHERE c.id = cur.rid
          RETURNING c.id
        ), upd AS (
          UPDATE namespaces n SET reserved = n.reserved - t.amount, credits = n.credits - t.charge
          FROM (SELECT sum(amount) AS amount, sum(charge) AS charge FROM cur) t
          WHERE n.id = ${namespaceId}::uuid AND t.amount IS NOT NULL
          RETURNING n.credits
        )
        INSERT INTO credit_ledger (id, namespace_id, kind, amount, balance_after, reservation_id)
        SELECT gen_random_uuid(), ${namespaceId}::uuid, 'charge'::"LedgerKind", -w.charge, upd.credits + (w.total - w.running), w.rid
        FROM (SELECT rid, charge, sum(charge) OVER (ORDER BY ord) AS running, sum(charge) OVER () AS total FROM cur) w, upd
        RETURNING reservation_id::text AS id, (-amount)::text AS charged`;
      charged = new Map(rows.map((r) => [r.id, new Prisma.Decimal(r.charged).toFixed()]));
    } catch (err) {
      this.logger.warn(`Batched settle of ${within.length} failed (${(err as Error).message}); settling one by one`);
      await Promise.all(batch.map(single));
      return;
    }
    const rest: Pending<SettleInput, Settlement>[] = [...beyond];
    for (const p of within) {
      const amount = charged.get(p.input.reservation.id);
      if (amount !== undefined) p.resolve({ reservationId: p.input.reservation.id, charged: amount, applied: true });
      // Already closed (a retried settle): the ledger reports what was charged, applied: false.
      else rest.push(p);
    }
    await Promise.all(rest.map(single));
  }
}
