import { Injectable, Optional } from '@nestjs/common';
import { ApiError, DECIMAL_PATTERN, UUID_PATTERN } from '@atelier/contracts';
import { Prisma, PrismaService } from '@atelier/db';
import { creditAmount, Metrics } from '@atelier/observability';
import { uuidV7 } from '@atelier/random';
import { canonicalDecimal } from './decimal-text';
import { RELEASE_SQL, RESERVE_BUDGETED_SQL, RESERVE_ONE_SQL, RESERVE_SQL, SETTLE_ONE_SQL } from './credit-statements';

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
  reference: string;
  /** It holds a max_concurrent slot (PaidRequests), given back when it closes. */
  holdsSlot?: boolean;
}

/** Who pays and for what: the usage facts known when a request reserves. */
export interface ChargeTags {
  /** The API key that made the request (usage by key). */
  apiKeyId?: string;
  /** Set when that key has a budget: the reservation is held against it too (402 budget_exceeded). */
  budgetOf?: string;
  model?: string;
  endpoint?: string;
  /** max_concurrent limits the request holds a slot in until it ends (its key's and namespace's). */
  concurrency?: NamedConcurrencyLimit[];
}

/** A max_concurrent limit with the words that name it in a 429. */
export interface NamedConcurrencyLimit {
  key: string;
  limit: number;
  name: string;
}

/** What a request delivered, recorded with its charge (GET /api/usage). */
export interface DeliveredUsage {
  inputTokens?: number;
  outputTokens?: number;
  images?: number;
  videoSeconds?: number;
  /** How the request ended: written on its reservation by the statement that settles or releases it. */
  request?: RequestRecord;
}

/** A request's record (the chat_usage view), kept on its reservation. */
export interface RequestRecord {
  outcome: 'succeeded' | 'failed' | 'cancelled';
  userId: string;
  /** Engine or upstream server that answered; null if none did. */
  provider: string | null;
  stream: boolean;
  requestId: string | null;
  errorMessage: string | null;
  durationMs: number;
}

/** A count as an int4 column takes it: rounded, at most int4's maximum, and 0 when negative or not a number. */
const whole = (n: number | undefined) => (n !== undefined && Number.isFinite(n) && n > 0 ? Math.min(Math.round(n), 2_147_483_647) : 0);

/**
 * The record as the closing statements read it (jsonb; null for none). Only values those
 * statements can cast: a record must never be the reason a charge fails to land. Postgres stores
 * no NUL in text or jsonb, and an upstream's error text is the one field no input check has
 * seen: NULs become U+FFFD.
 */
export function requestRecordJson(record: RequestRecord | undefined): string | null {
  if (!record) return null;
  const text = (s: string | null) => (s === null ? null : s.replace(/\0/g, '\uFFFD'));
  return JSON.stringify({
    outcome: record.outcome,
    userId: UUID_PATTERN.test(record.userId) ? record.userId : null,
    provider: text(record.provider),
    stream: record.stream,
    requestId: text(record.requestId),
    errorMessage: text(record.errorMessage),
    durationMs: Number.isFinite(record.durationMs) ? whole(record.durationMs) : null,
  });
}

/** The reservations a reserve statement took for these items. */
export function reservationsOf(namespaceId: string, items: { id: string; amount: string; reference: string }[]): Reservation[] {
  return items.map((i) => ({ id: i.id, namespaceId, amount: canonicalDecimal(i.amount), reference: i.reference }));
}

/** RESERVE_BUDGETED_SQL's answer. */
export interface BudgetedReserveRow {
  credits_ok: boolean;
  budget_ok: boolean;
  spent: string;
  held: string;
  max_spend: string | null;
  /** The namespace's credits less its reservations, before this call. */
  available: string;
  inserted: number;
}

type ReserveItem = { id: string; amount: string; reference: string };

/** RESERVE_SQL's parameters: the calls in arrival order, each all or nothing. */
export function reserveValues(namespaceId: string, calls: { items: ReserveItem[]; tags: ChargeTags }[]): unknown[] {
  return [
    namespaceId,
    calls.flatMap((c) => c.items.map((i) => i.id)),
    calls.flatMap((c) => c.items.map((i) => i.amount)),
    calls.flatMap((c) => c.items.map((i) => i.reference)),
    calls.flatMap((c, call) => c.items.map(() => call)),
    calls.flatMap((c) => c.items.map(() => c.tags.apiKeyId ?? null)),
    calls.flatMap((c) => c.items.map(() => c.tags.model ?? null)),
    calls.flatMap((c) => c.items.map(() => c.tags.endpoint ?? null)),
  ];
}

/** RESERVE_ONE_SQL's parameters. */
export function reserveOneValues(namespaceId: string, item: ReserveItem, tags: ChargeTags): unknown[] {
  return [namespaceId, item.amount, item.id, item.reference, tags.apiKeyId ?? null, tags.model ?? null, tags.endpoint ?? null];
}

/** SETTLE_ONE_SQL's parameters. */
export function settleOneValues(reservationId: string, actual: string, usage: DeliveredUsage | undefined): unknown[] {
  return [reservationId, actual, ...usageColumns([usage]).map((column) => column[0])];
}

/** RESERVE_BUDGETED_SQL's parameters. */
export function budgetedReserveValues(namespaceId: string, items: ReserveItem[], tags: ChargeTags): unknown[] {
  return [namespaceId, items.map((i) => i.id), items.map((i) => i.amount), items.map((i) => i.reference), tags.apiKeyId, tags.model ?? null, tags.endpoint ?? null];
}

/** The settle statements' usage parameters ($3..$7) for settles in this order: SETTLE_SQL takes the records ($7) through recordsArrayJson. */
export function usageColumns(usages: (DeliveredUsage | undefined)[]): [number[], number[], number[], number[], (string | null)[]] {
  return [
    usages.map((u) => whole(u?.inputTokens)),
    usages.map((u) => whole(u?.outputTokens)),
    usages.map((u) => whole(u?.images)),
    usages.map((u) => (u?.videoSeconds !== undefined && Number.isFinite(u.videoSeconds) && u.videoSeconds > 0 ? Math.min(u.videoSeconds, 1e8) : 0)),
    usages.map((u) => requestRecordJson(u?.request)),
  ];
}

/** SETTLE_SQL's $7: the settles' records (requestRecordJson) as one JSON array, in their order. */
export function recordsArrayJson(records: (string | null)[]): string {
  return `[${records.map((r) => r ?? 'null').join(',')}]`;
}

/** Which reservations a stale sweep may release (see releaseStale). */
export interface StaleReservationRule {
  /** The reference prefix of one kind of paid request (PAID_REQUEST_KINDS). */
  prefix: string;
  /** Past this age the request that reserved can no longer settle. */
  maxAgeMs: number;
  /** Of the given ids, those still owned by live work (a queued generation): never released. */
  inUse?: (ids: string[]) => Promise<Set<string>>;
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
  async reserve(namespaceId: string, amount: string, reference: string, client: Db = this.prisma, tags: ChargeTags = {}): Promise<Reservation> {
    const [reservation] = await this.reserveBatch(namespaceId, [{ id: uuidV7(), amount, reference }], client, tags);
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
    tags: ChargeTags = {},
  ): Promise<Reservation[]> {
    let total = new Prisma.Decimal(0);
    for (const item of items) {
      assertAmount(item.amount, 'amount');
      if (new Prisma.Decimal(item.amount).isNegative()) throw new Error('cannot reserve a negative amount');
      total = total.plus(item.amount);
    }
    const amount = total.toFixed();
    if (tags.budgetOf !== undefined && tags.apiKeyId !== undefined) return this.reserveBudgeted(namespaceId, items, amount, tags, client);
    const rows =
      items.length === 1
        ? await client.$queryRawUnsafe<{ id: string }[]>(RESERVE_ONE_SQL, ...reserveOneValues(namespaceId, items[0], tags))
        : await client.$queryRawUnsafe<{ id: string }[]>(RESERVE_SQL, ...reserveValues(namespaceId, [{ items, tags }]));
    if (rows.length === 0) throw await this.insufficient(namespaceId, amount, client);
    this.metrics?.creditsReserved.inc(creditAmount(amount));
    return reservationsOf(namespaceId, items);
  }

  /**
   * RESERVE_BUDGETED_SQL: the namespace's credits and the key's budget, both or neither, judged
   * under both row locks. Budgeted calls skip group commit: a budget is per key, and its row
   * lock serialises them exactly (tested: 60 concurrent requests against a budget for 20).
   */
  private async reserveBudgeted(
    namespaceId: string,
    items: { id: string; amount: string; reference: string }[],
    amount: string,
    tags: ChargeTags,
    client: Db,
  ): Promise<Reservation[]> {
    const [row] = await client.$queryRawUnsafe<BudgetedReserveRow[]>(
      RESERVE_BUDGETED_SQL,
      ...budgetedReserveValues(namespaceId, items, tags),
    );
    return this.budgetedOutcome(row, namespaceId, items, amount, tags, client);
  }

  /** What RESERVE_BUDGETED_SQL's answer means: the reservations, or the 402 that refused them. */
  async budgetedOutcome(
    row: BudgetedReserveRow | undefined,
    namespaceId: string,
    items: { id: string; amount: string; reference: string }[],
    amount: string,
    tags: ChargeTags,
    client: Db = this.prisma,
  ): Promise<Reservation[]> {
    if (!row) throw ApiError.unauthorized('Invalid API key');
    if (!row.credits_ok) throw await this.insufficient(namespaceId, amount, client);
    if (!row.budget_ok || row.inserted === 0) {
      const maxSpend = fmt(row.max_spend ?? 0);
      const left = new Prisma.Decimal(maxSpend).minus(row.spent).minus(row.held);
      throw new ApiError('budget_exceeded', `Budget exceeded for key ${tags.budgetOf}`, {
        max_spend: maxSpend,
        spent: fmt(row.spent),
        reserved: fmt(row.held),
        available: (left.isNegative() ? new Prisma.Decimal(0) : left).toFixed(),
        required: fmt(amount),
      });
    }
    this.metrics?.creditsReserved.inc(creditAmount(amount));
    return reservationsOf(namespaceId, items);
  }

  private async insufficient(namespaceId: string, amount: string, client: Db): Promise<ApiError> {
    const balance = await this.balance(namespaceId, client);
    return ApiError.insufficientCredits(
      `Insufficient credits: this request needs ${fmt(amount)} credits but only ${balance.available} are available`,
      { required: fmt(amount), available: balance.available },
    );
  }

  /**
   * Charges the actual cost and closes the reservation, in one statement (SETTLE_ONE_SQL, the
   * settle rule for one reservation: a cost above the reservation is charged as far as
   * unreserved credits reach).
   * A retried or concurrent settle finds the reservation closed: no double charge.
   */
  async settle(reservationId: string, actual: string, client: Db = this.prisma, usage?: DeliveredUsage): Promise<Settlement> {
    assertAmount(actual, 'actual');
    const rows = await client.$queryRawUnsafe<{ charged: string }[]>(SETTLE_ONE_SQL, ...settleOneValues(reservationId, actual, usage));
    if (rows.length === 0) return this.alreadyClosed(reservationId, client);
    this.metrics?.creditsSettled.inc(creditAmount(fmt(rows[0].charged)));
    return { reservationId, charged: fmt(rows[0].charged), applied: true };
  }

  /**
   * Releases the open reservations of `rule.prefix` older than `rule.maxAgeMs` that nothing
   * still owns: their request can no longer settle them (a crash between reserve and settle).
   * Releasing, never charging, is the safe side: the user keeps the credits.
   * `closed_at IS NULL` says the same as `status = 'open'` and lets Postgres read only the open
   * ones, oldest first, from their partial index instead of scanning the table.
   */
  async releaseStale(rule: StaleReservationRule, limit = 500): Promise<number> {
    const stale = await this.prisma.$queryRaw<{ id: string }[]>`
      SELECT id::text FROM credit_reservations
      WHERE closed_at IS NULL AND status = 'open' AND starts_with(reference, ${rule.prefix})
        AND created_at < now() - (${rule.maxAgeMs}::bigint * interval '1 millisecond')
      ORDER BY created_at LIMIT ${limit}`;
    const owned = rule.inUse && stale.length > 0 ? await rule.inUse(stale.map((r) => r.id)) : new Set<string>();
    let released = 0;
    for (const r of stale) if (!owned.has(r.id) && (await this.release(r.id))) released++;
    return released;
  }

  /** Gives the reserved credits back (failure, cancel), with the request's record if it has one. Idempotent; one statement. */
  async release(reservationId: string, client: Db = this.prisma, record?: RequestRecord): Promise<boolean> {
    const rows = await client.$queryRawUnsafe<{ id: string }[]>(RELEASE_SQL, reservationId, requestRecordJson(record));
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

/** A namespace row's credits and reserved amount (decimals, or their text) as the balance callers see. */
export function toBalance(row: { credits: Prisma.Decimal | string; reserved: Prisma.Decimal | string }): CreditBalance {
  const credits = new Prisma.Decimal(row.credits);
  const reserved = new Prisma.Decimal(row.reserved);
  return { credits: credits.toFixed(), reserved: reserved.toFixed(), available: credits.minus(reserved).toFixed() };
}
