import { randomUUID } from 'node:crypto';
import { Injectable, Optional } from '@nestjs/common';
import { ApiError, DECIMAL_PATTERN } from '@atelier/contracts';
import { Prisma, PrismaService } from '@atelier/db';
import { creditAmount, Metrics } from '@atelier/observability';

export interface CreditBalance {
  credits: string;
  reserved: string;
  /** What requests may still reserve: credits - reserved. */
  available: string;
}

export interface Reservation {
  id: string;
  namespaceId: string;
  amount: string;
}

export interface Settlement {
  reservationId: string;
  charged: string;
  /** False when the reservation had already been settled or released (a retried settle). */
  applied: boolean;
}

function assertAmount(amount: string, what: string): void {
  if (!DECIMAL_PATTERN.test(amount)) throw new Error(`${what} must be a decimal string, got ${amount}`);
}

/** The client or an open transaction: callers may make a credit step part of their own transaction. */
type Db = Prisma.TransactionClient;

const fmt = (d: Prisma.Decimal | string | number) => new Prisma.Decimal(d).toFixed();

/**
 * Credits: reserve before work, settle the actual cost after, release on failure or cancel.
 * Every step is one atomic statement or transaction guarded by the reservation's status, so
 * concurrent requests cannot overspend and a retried settle/release never charges twice.
 */
@Injectable()
export class CreditLedger {
  constructor(
    private readonly prisma: PrismaService,
    @Optional() readonly metrics?: Metrics,
  ) {}

  /**
   * Takes `amount` out of what the namespace may spend, or throws 402. A single conditional
   * UPDATE ... RETURNING feeding the INSERT: Postgres row locking serialises concurrent
   * reservations, and the condition is re-checked on the locked row.
   */
  async reserve(namespaceId: string, amount: string, reference: string, client: Db = this.prisma): Promise<Reservation> {
    const [reservation] = await this.reserveBatch(namespaceId, [{ id: randomUUID(), amount, reference }], client);
    return reservation;
  }

  /**
   * All or nothing: reserves the sum of `items` and records one reservation per item, in one
   * statement. Callers inside a transaction should call it last, right before commit, so the
   * namespace row stays locked as briefly as possible (it is the hot spot under load).
   */
  async reserveBatch(
    namespaceId: string,
    items: { id: string; amount: string; reference: string }[],
    client: Db = this.prisma,
  ): Promise<Reservation[]> {
    let total = new Prisma.Decimal(0);
    for (const item of items) {
      assertAmount(item.amount, 'amount');
      if (new Prisma.Decimal(item.amount).isNegative()) throw new Error('cannot reserve a negative amount');
      total = total.plus(item.amount);
    }
    const amount = total.toFixed();
    const rows = await client.$queryRaw<{ id: string }[]>`
      WITH ns AS (
        UPDATE namespaces SET reserved = reserved + ${amount}::numeric
        WHERE id = ${namespaceId}::uuid AND credits - reserved >= ${amount}::numeric
        RETURNING id
      )
      INSERT INTO credit_reservations (id, namespace_id, amount, reference, status)
      SELECT t.id, ns.id, t.amount, t.reference, 'open'
      FROM ns, unnest(${items.map((i) => i.id)}::uuid[], ${items.map((i) => i.amount)}::numeric[], ${items.map((i) => i.reference)}::text[]) AS t(id, amount, reference)
      RETURNING id::text AS id`;
    if (rows.length === 0) {
      const balance = await this.balance(namespaceId, client);
      throw ApiError.insufficientCredits(
        `Insufficient credits: this request needs ${fmt(amount)} credits but only ${balance.available} are available`,
        { required: fmt(amount), available: balance.available },
      );
    }
    this.metrics?.creditsReserved.inc(creditAmount(amount));
    return items.map((i) => ({ id: i.id, namespaceId, amount: fmt(i.amount) }));
  }

  /**
   * Charges the actual cost and closes the reservation, in one statement (one round trip, row
   * locks held only for its duration). The charge is capped at what the namespace can pay (the
   * reservation plus any unreserved credits), so balances never go negative even when the
   * actual cost exceeds the estimate. Under READ COMMITTED, a concurrent settle of the same
   * reservation re-checks `status = 'open'` after the lock and finds nothing: no double charge.
   */
  async settle(reservationId: string, actual: string, client: Db = this.prisma): Promise<Settlement> {
    assertAmount(actual, 'actual');
    const rows = await client.$queryRaw<{ charged: string }[]>`
      WITH cur AS (
        SELECT c.id AS rid, c.namespace_id, c.amount,
               LEAST(GREATEST(${actual}::numeric, 0), c.amount + GREATEST(n.credits - n.reserved, 0)) AS charge
        FROM credit_reservations c JOIN namespaces n ON n.id = c.namespace_id
        WHERE c.id = ${reservationId}::uuid AND c.status = 'open'
        FOR UPDATE OF c, n
      ), closed AS (
        UPDATE credit_reservations c SET status = 'settled', closed_at = now(), charged = cur.charge
        FROM cur WHERE c.id = cur.rid
        RETURNING c.id
      ), ns AS (
        UPDATE namespaces n SET reserved = n.reserved - cur.amount, credits = n.credits - cur.charge
        FROM cur WHERE n.id = cur.namespace_id
        RETURNING n.id, n.credits
      )
      INSERT INTO credit_ledger (id, namespace_id, kind, amount, balance_after, reservation_id)
      SELECT gen_random_uuid(), ns.id, 'charge'::"LedgerKind", -cur.charge, ns.credits, cur.rid FROM ns, cur, closed
      RETURNING (-amount)::text AS charged`;
    if (rows.length === 0) return this.alreadyClosed(reservationId, client);
    this.metrics?.creditsSettled.inc(creditAmount(fmt(rows[0].charged)));
    return { reservationId, charged: fmt(rows[0].charged), applied: true };
  }

  /**
   * Releases reservations of `referencePrefix` still open after `olderThanMs`: their request
   * can no longer be running (a crash between the call and its settle). Releasing, never
   * charging, is the safe side: the user keeps credits, nothing is charged twice.
   */
  async releaseStale(referencePrefix: string, olderThanMs: number, limit = 500): Promise<number> {
    const stale = await this.prisma.$queryRaw<{ id: string }[]>`
      SELECT id::text FROM credit_reservations
      WHERE status = 'open' AND starts_with(reference, ${referencePrefix})
        AND created_at < now() - (${olderThanMs}::bigint * interval '1 millisecond')
      ORDER BY created_at LIMIT ${limit}`;
    let released = 0;
    for (const r of stale) if (await this.release(r.id)) released++;
    return released;
  }

  /** Gives the reserved credits back (failure, cancel). Idempotent; one statement. */
  async release(reservationId: string, client: Db = this.prisma): Promise<boolean> {
    const rows = await client.$queryRaw<{ id: string }[]>`
      WITH cur AS (
        SELECT id, namespace_id, amount FROM credit_reservations
        WHERE id = ${reservationId}::uuid AND status = 'open'
        FOR UPDATE
      ), closed AS (
        UPDATE credit_reservations c SET status = 'released', closed_at = now(), charged = 0
        FROM cur WHERE c.id = cur.id
        RETURNING c.id
      )
      UPDATE namespaces n SET reserved = n.reserved - cur.amount
      FROM cur, closed WHERE n.id = cur.namespace_id
      RETURNING n.id::text AS id`;
    if (rows.length > 0) this.metrics?.creditReleases.inc();
    return rows.length > 0;
  }

  /** Operator grant or correction (negative). Refuses to push credits below what is reserved. */
  async adjust(namespaceId: string, amount: string, reference: string): Promise<CreditBalance> {
    assertAmount(amount, 'amount');
    return this.prisma.$transaction(async (tx) => {
      const rows = await tx.$queryRaw<{ credits: Prisma.Decimal; reserved: Prisma.Decimal }[]>`
        UPDATE namespaces SET credits = credits + ${amount}::numeric
        WHERE id = ${namespaceId}::uuid AND credits + ${amount}::numeric >= reserved
        RETURNING credits, reserved`;
      if (rows.length === 0) {
        const b = await this.balance(namespaceId, tx);
        throw ApiError.badRequest(
          `Adjustment of ${fmt(amount)} would leave the namespace with fewer credits than it has reserved (credits ${b.credits}, reserved ${b.reserved})`,
        );
      }
      await tx.creditLedgerEntry.create({
        data: { namespaceId, kind: 'grant', amount: new Prisma.Decimal(amount), balanceAfter: rows[0].credits, reference },
      });
      return toBalance(rows[0]);
    });
  }

  async balance(namespaceId: string, client: Prisma.TransactionClient = this.prisma): Promise<CreditBalance> {
    const ns = await client.namespace.findUniqueOrThrow({ where: { id: namespaceId }, select: { credits: true, reserved: true } });
    return toBalance(ns);
  }

  private async alreadyClosed(reservationId: string, client: Db): Promise<Settlement> {
    const r = await client.creditReservation.findUnique({ where: { id: reservationId }, select: { charged: true } });
    if (!r) throw new Error(`Unknown credit reservation ${reservationId}`);
    return { reservationId, charged: fmt(r.charged ?? 0), applied: false };
  }
}

function toBalance(row: { credits: Prisma.Decimal; reserved: Prisma.Decimal }): CreditBalance {
  const credits = new Prisma.Decimal(row.credits);
  const reserved = new Prisma.Decimal(row.reserved);
  return { credits: credits.toFixed(), reserved: reserved.toFixed(), available: credits.minus(reserved).toFixed() };
}
