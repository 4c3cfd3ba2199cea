import { Inject, Injectable, type OnModuleDestroy } from '@nestjs/common';
import type { Pool } from 'pg';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { DECIMAL_PATTERN } from '@atelier/contracts';
import { createPgPool, Prisma } from '@atelier/db';
import { creditAmount } from '@atelier/observability';
import { uuidV7 } from '@atelier/random';
import { GroupCommit } from '@atelier/runtime';
import { canonicalDecimal } from './decimal-text';
import { sparesFor, type SpareReading } from './spare-credits';
import { budgetedReserveValues, CreditLedger, reserveOneValues, recordsArrayJson, reservationsOf, reserveValues, settleOneValues, toBalance, usageColumns, type BudgetedReserveRow, type ChargeTags, type CreditBalance, type DeliveredUsage, type RequestRecord, type Reservation, type Settlement } from './credit-ledger.service';
import { RESERVE_BUDGETED_SQL, RESERVE_ONE_SQL, RESERVE_SQL, SETTLE_ONE_SQL, SETTLE_SQL } from './credit-statements';

/**
 * Named, so each pooled connection parses and plans them once: planning these CTEs is about half
 * of what a reserve or settle costs Postgres (0.95 -> 0.45 ms and 1.33 -> 0.65 ms p50 measured
 * on a 2-core machine, one statement at a time).
 */
const RESERVE_STATEMENT = { name: 'atelier_reserve_v3', text: RESERVE_SQL };
const SETTLE_STATEMENT = { name: 'atelier_settle_v6', text: SETTLE_SQL };
const RESERVE_BUDGETED_STATEMENT = { name: 'atelier_reserve_budgeted_v2', text: RESERVE_BUDGETED_SQL };
/** A batch of one (most of them, unless calls overlap) runs the statements written for one. */
const RESERVE_ONE_STATEMENT = { name: 'atelier_reserve_one_v1', text: RESERVE_ONE_SQL };
const SETTLE_ONE_STATEMENT = { name: 'atelier_settle_one_v3', text: SETTLE_ONE_SQL };
const BALANCE_STATEMENT = { name: 'atelier_balance_v1', text: 'SELECT credits::text AS credits, reserved::text AS reserved FROM namespaces WHERE id = $1::uuid' };

/**
 * The named statements above are planned once per connection and that plan is kept until the
 * tables are analyzed again, which a server without autovacuum never does. Planned on a new,
 * nearly empty table, a sequential scan looks cheapest, and would stay in use as the table grows
 * to millions of reservations. Every row these statements touch is found by primary key, so
 * these connections never need a sequential scan; turned off, the plan probes the key at any size.
 */
export const LEDGER_SESSION_SETTINGS: Readonly<Record<string, string>> = { enable_seqscan: 'off' };

/** Readings kept at most (namespaces and budgeted keys); beyond, all are dropped and read again. */
const MAX_HEADROOM_ENTRIES = 10_000;

/**
 * How long a settle that finds its lane idle waits for others to share its statement. Settles run
 * after the answer went out, so nobody waits on this; without it, at a steady few hundred requests
 * per second nearly every settle was a durable commit of its own (bench:chat phase 1 at 500
 * req/s, medians of three alternating pairs: Postgres CPU per request 0.76 -> 0.53 ms, its
 * wake-ups 3.8 -> 2.8, all processes' CPU 3.15 -> 2.64 ms, added p50 5.1 -> 2.4 ms). The price:
 * a gateway that crashes within it leaves those answered requests' reservations open, released
 * uncharged by the stale sweep, as a crash while the statement is in flight always did.
 */
const SETTLE_LINGER_MS = 10;

/** One call: its reservations are taken all together or not at all. */
interface ReserveInput {
  items: { id: string; amount: string; reference: string }[];
  tags: ChargeTags;
}

interface SettleInput {
  reservation: Reservation;
  actual: string;
  usage?: DeliveredUsage;
}

/**
 * The two lanes of one namespace. Each has at most one statement in flight; calls that arrive
 * meanwhile go together in the next one. They are separate so a reservation (on the caller's
 * latency) never waits for a settle (after the answer) to come back: the two statements only
 * meet on the namespace row lock inside Postgres, for the rest of the other's statement.
 */
interface Lanes {
  reserves: GroupCommit<ReserveInput, boolean>;
  settles: GroupCommit<SettleInput, string | undefined>;
}

/**
 * CreditLedger with group commit for hot namespaces. Every reserve and settle of a namespace
 * locks its one row, so on their own they run one Postgres commit at a time (bench:credits:
 * a few hundred cycles per second). Here, the reservations of a namespace that arrive while its
 * previous reserve statement is in flight wait for it, then go to Postgres together in ONE
 * statement (its own transaction, one commit); settles likewise, in their own lane.
 *
 * The guarantees are CreditLedger's, statement for statement (both run credit-statements.ts):
 * - never overspend: a batch of reservations is accepted in arrival order as long as the
 *   running total fits what the namespace can spend, read on the row the statement locked;
 *   a call it refuses is retried alone through CreditLedger.reserveBatch (its exact 402) once
 *   the settles already given for the namespace have landed, so credits those free count;
 * - never charge twice: a batch settles only reservations still `open`, under their row
 *   locks, exactly like CreditLedger.settle, so a retried or concurrent settle (or release)
 *   finds nothing to do;
 * - crash safety: each call resolves only after the statement holding it has committed, so
 *   whatever a caller was told is durable, and a statement applies entirely or not at all;
 *   a crash loses only calls not yet answered (their reservations stay open, never charged),
 *   settles included while they linger (SETTLE_LINGER_MS).
 * Lock order is the statements' own (reservation rows, then the namespace row), so the two
 * lanes cannot deadlock. The statements run on a small pg pool of their own (Prisma costs about
 * twice the CPU per raw query). A batch that fails is retried call by call (GroupCommit).
 */
@Injectable()
export class BatchedCreditLedger implements OnModuleDestroy {
  private readonly lanes = new Map<string, Lanes>();
  /**
   * Per namespace (by id) and per budgeted key (`budget:<key id>`): what it could still spend
   * after this process's last reservation there, and when.
   */
  private readonly headroom = new Map<string, SpareReading>();
  private pools?: { reserves: Pool; settles: Pool };

  constructor(
    private readonly ledger: CreditLedger,
    @Inject(APP_CONFIG) private readonly config: Pick<AppConfig, 'DATABASE_URL'>,
  ) {}

  /** Statements sent and the calls they carried (calls / statements = the batching factor). */
  readonly stats = { transactions: 0, calls: 0 };

  /** `id`: the reservation's id, when the caller must name it before it is taken. */
  async reserve(namespaceId: string, amount: string, reference: string, tags: ChargeTags = {}, id?: string): Promise<Reservation> {
    const [reservation] = await this.reserveMany(namespaceId, [{ amount, reference, id }], tags);
    return reservation;
  }

  /**
   * True when the namespace's last reservation in this process left it ample credits to spare
   * for `amount`, and so did the key's budget when it has one (`budgetKeyId`): a reservation of
   * `amount` is then all but certain to be taken (spare-credits.ts says how ample, by the
   * reading's age). A hint for overlapping work with the reservation, never a decision: only the
   * reservation itself, under the namespace's (and the key's) row lock, takes credits.
   */
  coversAtOnce(namespaceId: string, amount: string, budgetKeyId?: string): boolean {
    const request = Number(amount);
    return this.spares(namespaceId, request) && (budgetKeyId === undefined || this.spares(budgetHeadroomKey(budgetKeyId), request));
  }

  private spares(key: string, amount: number): boolean {
    const known = this.headroom.get(key);
    if (!known) return false;
    const covers = sparesFor(known, amount, performance.now());
    if (covers === 'expired') {
      this.headroom.delete(key);
      return false;
    }
    return covers;
  }

  /** What `key` can still spend after this process's latest reservation there (undefined: short, so no guessing). */
  private remember(key: string, available: number | undefined): void {
    if (available === undefined || !Number.isFinite(available)) {
      this.headroom.delete(key);
      return;
    }
    if (this.headroom.size >= MAX_HEADROOM_ENTRIES) this.headroom.clear();
    this.headroom.set(key, { available, at: performance.now() });
  }

  /**
   * Several reservations for one request (e.g. num_generations), all or nothing; 402 otherwise.
   * A key with a budget reserves alone through the ledger (its key row decides, under its lock).
   */
  async reserveMany(namespaceId: string, items: { amount: string; reference: string; id?: string }[], tags: ChargeTags = {}): Promise<Reservation[]> {
    const input = { items: items.map((i) => ({ amount: i.amount, reference: i.reference, id: i.id ?? uuidV7() })), tags };
    if (items.some((i) => !DECIMAL_PATTERN.test(i.amount))) return this.ledger.reserveBatch(namespaceId, input.items, undefined, tags);
    if (tags.budgetOf !== undefined && tags.apiKeyId !== undefined) {
      // Alone, not batched (the key's row lock orders a key's calls), on the reservation pool:
      // prepared once per connection and committed like every other hold.
      const amount = input.items.reduce((sum, i) => sum.plus(i.amount), new Prisma.Decimal(0)).toFixed();
      const { rows } = await this.query<BudgetedReserveRow>('reserves', RESERVE_BUDGETED_STATEMENT, 1, budgetedReserveValues(namespaceId, input.items, tags));
      this.rememberBudgeted(namespaceId, tags.apiKeyId, rows[0], Number(amount));
      return this.ledger.budgetedOutcome(rows[0], namespaceId, input.items, amount, tags);
    }
    const lanes = this.lanesOf(namespaceId);
    if (!(await lanes.reserves.submit(input))) {
      // The batch stops at the first reservation that does not fit; a smaller one after it may
      // still fit, and settles given before this call may free what it needs. The ledger
      // decides alone, after them, with its exact 402.
      await lanes.settles.idle();
      return this.ledger.reserveBatch(namespaceId, input.items, undefined, tags);
    }
    for (const item of input.items) this.ledger.metrics?.creditsReserved.inc(creditAmount(item.amount));
    return reservationsOf(namespaceId, input.items);
  }

  async settle(reservation: Reservation, actual: string, usage?: DeliveredUsage): Promise<Settlement> {
    if (!DECIMAL_PATTERN.test(actual)) return this.ledger.settle(reservation.id, actual, undefined, usage);
    const charged = await this.lanesOf(reservation.namespaceId).settles.submit({ reservation, actual, usage });
    // Already closed (a retried settle): the ledger reports what was charged, applied: false.
    if (charged === undefined) return this.ledger.settle(reservation.id, actual, undefined, usage);
    this.ledger.metrics?.creditsSettled.inc(creditAmount(charged));
    return { reservationId: reservation.id, charged, applied: true };
  }

  /**
   * What a namespace holds, has reserved and can spend (GET /api/credits), read on this ledger's
   * own pool: through Prisma the one read cost the gateway 0.17 ms of CPU more per request, four
   * times a whole authenticated GET of a model (numbers in the issue note).
   */
  async balance(namespaceId: string): Promise<CreditBalance> {
    const { rows } = await this.pool('settles').query<{ credits: string; reserved: string }>({ ...BALANCE_STATEMENT, values: [namespaceId] });
    // No such namespace: the ledger's own read says so, as it always has.
    return rows[0] ? toBalance(rows[0]) : this.ledger.balance(namespaceId);
  }

  /** Releases are rare (failures, cancels); they go straight to the ledger. */
  release(reservationId: string, record?: RequestRecord): Promise<boolean> {
    return this.ledger.release(reservationId, undefined, record);
  }

  async onModuleDestroy(): Promise<void> {
    // Settles still lingering were promised to answered requests: they go (idle() sends them) before the pools close.
    await Promise.all([...this.lanes.values()].flatMap(({ reserves, settles }) => [reserves.idle(), settles.idle()]));
    await Promise.all([this.pools?.reserves.end(), this.pools?.settles.end()]);
  }

  private lanesOf(namespaceId: string): Lanes {
    let lanes = this.lanes.get(namespaceId);
    if (!lanes) {
      // Dropped once both lanes are drained, so the map only holds namespaces with calls in flight.
      const onIdle = () => {
        if (lanes!.reserves.isIdle && lanes!.settles.isIdle && this.lanes.get(namespaceId) === lanes) this.lanes.delete(namespaceId);
      };
      lanes = {
        reserves: new GroupCommit((calls) => this.reserveStatement(namespaceId, calls), { onIdle }),
        settles: new GroupCommit((calls) => this.settleStatement(calls), { onIdle, lingerMs: SETTLE_LINGER_MS }),
      };
      this.lanes.set(namespaceId, lanes);
    }
    return lanes;
  }

  /** One RESERVE_SQL for the batch (RESERVE_ONE_SQL for one call of one reservation); per call, whether its reservations were taken. */
  private async reserveStatement(namespaceId: string, calls: ReserveInput[]): Promise<boolean[]> {
    const { rows } =
      calls.length === 1 && calls[0].items.length === 1
        ? await this.query<{ id: string; available: string }>('reserves', RESERVE_ONE_STATEMENT, 1, reserveOneValues(namespaceId, calls[0].items[0], calls[0].tags))
        : await this.query<{ id: string; available: string }>('reserves', RESERVE_STATEMENT, calls.length, reserveValues(namespaceId, calls));
    const accepted = new Set(rows.map((r) => r.id));
    const taken = calls.map((c) => accepted.has(c.items[0].id));
    let left: number | undefined;
    // None fitted: the namespace is short of credits.
    if (rows.length > 0) {
      left = Number(rows[0].available);
      calls.forEach((c, i) => taken[i] && c.items.forEach((item) => (left! -= Number(item.amount))));
    }
    this.remember(namespaceId, left);
    return taken;
  }

  /** The namespace's and the key budget's spare after a budgeted call (as reserveStatement does for the namespace). */
  private rememberBudgeted(namespaceId: string, apiKeyId: string, row: BudgetedReserveRow | undefined, amount: number): void {
    const taken = row !== undefined && row.credits_ok && row.budget_ok && row.inserted > 0;
    this.remember(namespaceId, taken ? Number(row.available) - amount : undefined);
    this.remember(budgetHeadroomKey(apiKeyId), taken ? Number(row.max_spend) - Number(row.spent) - Number(row.held) - amount : undefined);
  }

  /** One SETTLE_SQL for the batch (SETTLE_ONE_SQL for a batch of one); per call, what it charged (undefined: it was already closed). */
  private async settleStatement(calls: SettleInput[]): Promise<(string | undefined)[]> {
    const { rows } =
      calls.length === 1
        ? await this.query<{ id: string; charged: string }>('settles', SETTLE_ONE_STATEMENT, 1, settleOneValues(calls[0].reservation.id, calls[0].actual, calls[0].usage))
        : await this.query<{ id: string; charged: string }>('settles', SETTLE_STATEMENT, calls.length, settleValues(calls));
    const charged = new Map(rows.map((r) => [r.id, canonicalDecimal(r.charged)]));
    return calls.map((c) => charged.get(c.reservation.id));
  }

  private pool(lane: 'reserves' | 'settles'): Pool {
    this.pools ??= {
      // A reservation is a hold, not money: it commits without waiting for its WAL flush
      // (half of what it costs Postgres). Whatever later charges it (a settle, the generation
      // rows of an enqueue) commits durably, which flushes the WAL up to and including it, so
      // only a hold whose request is still running can be forgotten, by a Postgres crash in
      // the flush interval (at most 3 x wal_writer_delay); that request is then not charged.
      // Visibility and locking are unchanged, so concurrent calls still cannot overspend.
      reserves: createPgPool(this.config.DATABASE_URL, 4, 'atelier-credits-reserve', { ...LEDGER_SESSION_SETTINGS, synchronous_commit: 'off' }),
      settles: createPgPool(this.config.DATABASE_URL, 4, 'atelier-credits-settle', LEDGER_SESSION_SETTINGS),
    };
    return this.pools[lane];
  }

  private async query<T extends object>(lane: 'reserves' | 'settles', statement: { name: string; text: string }, calls: number, values: unknown[]) {
    const result = await this.pool(lane).query<T>({ ...statement, values });
    this.stats.transactions++;
    this.stats.calls += calls;
    return result;
  }
}

/** SETTLE_SQL's parameters for these settles, in their order. */
function settleValues(calls: SettleInput[]): unknown[] {
  const [inputTokens, outputTokens, images, videoSeconds, records] = usageColumns(calls.map((c) => c.usage));
  return [calls.map((c) => c.reservation.id), calls.map((c) => c.actual), inputTokens, outputTokens, images, videoSeconds, recordsArrayJson(records)];
}

function budgetHeadroomKey(apiKeyId: string): string {
  return `budget:${apiKeyId}`;
}
