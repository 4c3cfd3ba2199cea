import { Injectable } from '@nestjs/common';
import { ApiError, DECIMAL_PATTERN } from '@atelier/contracts';
import { Prisma, PrismaService } from '@atelier/db';

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

const fmt = (d: Prisma.Decimal | string | number) => new Prisma.Decimal(d).toFixed();

/**
 * Credits: reserve before work, settle the actual cost after, release on failure or cancel.
 * Every step is one atomic statement or transaction guarded by the reservation's status, so
 * concurrent requests cannot overspend and a retried settle/release never charges twice.
 */
@Injectable()
export class CreditLedger {
  constructor(private readonly prisma: PrismaService) {}

  /**
   * Takes `amount` out of what the namespace may spend, or throws 402. A single conditional
   * UPDATE ... RETURNING feeding the INSERT: Postgres row locking serialises concurrent
   * reservations, and the condition is re-checked on the locked row.
   */
  async reserve(namespaceId: string, amount: string, reference: string): Promise<Reservation> {
    assertAmount(amount, 'amount');
    if (new Prisma.Decimal(amount).isNegative()) throw new Error('cannot reserve a negative amount');
    const rows = await this.prisma.$queryRaw<{ id: string }[]>`
      WITH ns AS (
        UPDATE namespaces SET reserved = reserved + ${amount}::numeric
        WHERE id = ${namespaceId}::uuid AND credits - reserved >= ${amount}::numeric
        RETURNING id
      )
      INSERT INTO credit_reservations (id, namespace_id, amount, reference, status)
      SELECT gen_random_uuid(), ns.id, ${amount}::numeric, ${reference}, 'open' FROM ns
      RETURNING id::text AS id`;
    if (rows.length === 0) {
      const balance = await this.balance(namespaceId);
      throw ApiError.insufficientCredits(
        `Insufficient credits: this request needs ${fmt(amount)} credits but only ${balance.available} are available`,
        { required: fmt(amount), available: balance.available },
      );
    }
    return { id: rows[0].id, namespaceId, amount: fmt(amount) };
  }

  /**
   * Charges the actual cost and closes the reservation. The charge is capped at what the
   * namespace can pay (the reservation plus any unreserved credits), so balances never go
   * negative even when the actual cost exceeds the estimate.
   */
  async settle(reservationId: string, actual: string): Promise<Settlement> {
    assertAmount(actual, 'actual');
    return this.prisma.$transaction(async (tx) => {
      const closed = await tx.$queryRaw<{ namespace_id: string; amount: Prisma.Decimal }[]>`
        UPDATE credit_reservations SET status = 'settled', closed_at = now()
        WHERE id = ${reservationId}::uuid AND status = 'open'
        RETURNING namespace_id::text, amount`;
      if (closed.length === 0) return this.alreadyClosed(tx, reservationId);
      const { namespace_id: namespaceId, amount } = closed[0];
      const [ns] = await tx.$queryRaw<{ credits: Prisma.Decimal; charge: Prisma.Decimal }[]>`
        WITH cur AS (
          SELECT LEAST(GREATEST(${actual}::numeric, 0), ${amount}::numeric + GREATEST(credits - reserved, 0)) AS charge
          FROM namespaces WHERE id = ${namespaceId}::uuid FOR UPDATE
        )
        UPDATE namespaces n SET reserved = n.reserved - ${amount}::numeric, credits = n.credits - cur.charge
        FROM cur WHERE n.id = ${namespaceId}::uuid
        RETURNING n.credits, cur.charge`;
      await tx.creditReservation.update({ where: { id: reservationId }, data: { charged: ns.charge } });
      await tx.creditLedgerEntry.create({
        data: {
          namespaceId,
          kind: 'charge',
          amount: new Prisma.Decimal(ns.charge).negated(),
          balanceAfter: ns.credits,
          reservationId,
        },
      });
      return { reservationId, charged: fmt(ns.charge), applied: true };
    });
  }

  /** Gives the reserved credits back (failure, cancel). Idempotent. */
  async release(reservationId: string): Promise<boolean> {
    return this.prisma.$transaction(async (tx) => {
      const closed = await tx.$queryRaw<{ namespace_id: string; amount: Prisma.Decimal }[]>`
        UPDATE credit_reservations SET status = 'released', closed_at = now(), charged = 0
        WHERE id = ${reservationId}::uuid AND status = 'open'
        RETURNING namespace_id::text, amount`;
      if (closed.length === 0) return false;
      await tx.$executeRaw`
        UPDATE namespaces SET reserved = reserved - ${closed[0].amount}::numeric WHERE id = ${closed[0].namespace_id}::uuid`;
      return true;
    });
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

  private async alreadyClosed(tx: Prisma.TransactionClient, reservationId: string): Promise<Settlement> {
    const r = await tx.creditReservation.findUnique({ where: { id: reservationId }, select: { charged: true } });
    if (!r) throw new Error(`Unknown credit reservation ${reservationId}`);
    return { reservationId, charged: fmt(r.charged ?? 0), applied: false };
  }
}

function toBalance(row: { credits: Prisma.Decimal; reserved: Prisma.Decimal }): CreditBalance {
  const credits = new Prisma.Decimal(row.credits);
  const reserved = new Prisma.Decimal(row.reserved);
  return { credits: credits.toFixed(), reserved: reserved.toFixed(), available: credits.minus(reserved).toFixed() };
}
