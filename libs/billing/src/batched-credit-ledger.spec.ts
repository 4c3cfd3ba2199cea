import { ApiError } from '@atelier/contracts';
import { createPrismaClient, type PrismaClient, type PrismaService } from '@atelier/db';
import { uuidV7Time } from '@atelier/random';
import { createTestEnvironment, nextMillisecond, type TestEnvironment } from '@atelier/testing';
import { BatchedCreditLedger } from './batched-credit-ledger.service';
import { CreditLedger, type RequestRecord, type Reservation } from './credit-ledger.service';
import { ledgerFixtures } from './ledger-fixtures.harness';

/**
 * The same guarantees as CreditLedger's own tests, with enough concurrency that calls really
 * are grouped into multi-row statements (asserted through the statement count).
 */
describe('BatchedCreditLedger (real Postgres)', () => {
  let env: TestEnvironment;
  let prisma: PrismaClient;
  let ledger: CreditLedger;
  let batched: BatchedCreditLedger;
  const statementsSince = (start: number) => batched.stats.transactions - start;

  const { namespaceWith, row } = ledgerFixtures(() => prisma);

  beforeAll(async () => {
    env = await createTestEnvironment();
    prisma = createPrismaClient(env.databaseUrl, 10);
    ledger = new CreditLedger(prisma as unknown as PrismaService);
    batched = new BatchedCreditLedger(ledger, { DATABASE_URL: env.databaseUrl });
  });
  afterAll(async () => {
    await batched?.onModuleDestroy();
    await prisma?.$disconnect();
    await env?.cleanup();
  });

  it('lets exactly as many concurrent reservations succeed as the balance allows, in far fewer statements', async () => {
    const ns = await namespaceWith('10');
    const start = batched.stats.transactions;
    const results = await Promise.allSettled(Array.from({ length: 60 }, (_, i) => batched.reserve(ns, '0.5', `req-${i}`)));
    const ok = results.filter((r) => r.status === 'fulfilled');
    expect(ok).toHaveLength(20);
    for (const r of results.filter((r) => r.status === 'rejected')) {
      const err = (r as PromiseRejectedResult).reason as ApiError;
      expect(err).toBeInstanceOf(ApiError);
      expect(err.status).toBe(402);
      expect(err.message).toMatch(/Insufficient credits: this request needs 0.5 credits but only 0 are available/);
    }
    expect(await row(ns)).toEqual({ credits: '10', reserved: '10' });
    // One transaction for the first call, one for the 59 that arrived meanwhile.
    expect(statementsSince(start)).toBeLessThanOrEqual(3);
    expect(await prisma.creditReservation.count({ where: { namespaceId: ns, status: 'open' } })).toBe(20);
    const ids = (ok as PromiseFulfilledResult<{ id: string }>[]).map((r) => r.value.id);
    expect(await prisma.creditReservation.count({ where: { id: { in: ids } } })).toBe(20);
  });

  it('settles concurrent charges exactly once each, with a consistent ledger, in batches', async () => {
    const ns = await namespaceWith('100');
    const reservations = await Promise.all(Array.from({ length: 40 }, (_, i) => batched.reserve(ns, '2', `r${i}`)));
    const start = batched.stats.transactions;
    const settled = await Promise.all(reservations.map((r, i) => batched.settle(r, i % 2 === 0 ? '1.25' : '0.000001')));
    expect(statementsSince(start)).toBeLessThanOrEqual(3);
    expect(settled.every((s) => s.applied)).toBe(true);
    const total = 20 * 1.25 + 20 * 0.000001;
    expect(await row(ns)).toEqual({ credits: String(100 - total), reserved: '0' });
    // A settle retried after the fact (and racing with others) charges nothing more.
    const again = await Promise.all(reservations.slice(0, 10).map((r) => batched.settle(r, '2')));
    expect(again.every((s) => !s.applied)).toBe(true);
    expect(again.map((s) => s.charged)).toEqual(reservations.slice(0, 10).map((_, i) => (i % 2 === 0 ? '1.25' : '0.000001')));
    expect(await row(ns)).toEqual({ credits: String(100 - total), reserved: '0' });
    // Every charge has one ledger entry, and balance_after walks down to the final balance.
    const entries = await prisma.creditLedgerEntry.findMany({ where: { namespaceId: ns }, orderBy: { balanceAfter: 'desc' } });
    expect(entries).toHaveLength(40);
    let balance = 100;
    for (const e of entries) {
      balance = Number((balance + e.amount.toNumber()).toFixed(6));
      expect(e.balanceAfter.toNumber()).toBeCloseTo(balance, 6);
    }
  });

  it('retries a reservation refused while a settle is in flight once the settle landed, so freed credits can be reserved again at once', async () => {
    const ns = await namespaceWith('1');
    const first = await batched.reserve(ns, '1', 'first');
    // The settle goes at once in its own lane; the reservation waits behind the blocker and may
    // find the credits still held, in which case it is retried after the settle.
    const blocker = batched.reserve(ns, '0', 'blocker');
    const [settled, second] = await Promise.all([batched.settle(first, '0.4'), batched.reserve(ns, '0.6', 'second'), blocker]);
    expect(settled).toMatchObject({ applied: true, charged: '0.4' });
    expect(second.amount).toBe('0.6');
    expect(await row(ns)).toEqual({ credits: '0.6', reserved: '0.6' });
  });

  it('gathers settles that arrive one by one, as at a steady rate, into one statement', async () => {
    const ns = await namespaceWith('10');
    const reservations = await Promise.all([0, 1, 2].map((i) => batched.reserve(ns, '1', `steady-${i}`)));
    const start = batched.stats.transactions;
    const settling: Promise<unknown>[] = [];
    // Each finds the lane idle (nothing in flight): without the linger each would be a commit of its own.
    for (const r of reservations) {
      settling.push(batched.settle(r, '0.5'));
      await new Promise((resolve) => setImmediate(resolve));
    }
    await Promise.all(settling);
    expect(statementsSince(start)).toBe(1);
    expect(await row(ns)).toEqual({ credits: '8.5', reserved: '0' });
  });

  it('commits a settle still lingering when the module is destroyed, before its pools close', async () => {
    const ns = await namespaceWith('5');
    const closing = new BatchedCreditLedger(ledger, { DATABASE_URL: env.databaseUrl });
    const reservation = await closing.reserve(ns, '2', 'at-shutdown');
    const settled = closing.settle(reservation, '1.5');
    await closing.onModuleDestroy();
    await expect(settled).resolves.toMatchObject({ applied: true, charged: '1.5' });
    expect(await row(ns)).toEqual({ credits: '3.5', reserved: '0' });
  });

  it('caps charges above the reservation at what the namespace can pay (never below zero)', async () => {
    const ns = await namespaceWith('3');
    const reservations = await Promise.all([1, 2, 3].map((i) => batched.reserve(ns, '1', `r${i}`)));
    const settled = await Promise.all(reservations.map((r) => batched.settle(r, '5')));
    expect(settled.map((s) => s.charged).sort()).toEqual(['1', '1', '1']);
    expect(await row(ns)).toEqual({ credits: '0', reserved: '0' });
  });

  it('charges a cost above the estimate by one rule, whichever ledger settles it', async () => {
    // Per ledger: 10 credits, two reservations of 2 (6 left free), actual costs 5 and 7.
    // The first is charged fully (2 + 3 of the free 6); the second gets its 2 plus the 3 left.
    const outcome = async (settle: (r: Reservation, actual: string) => Promise<{ charged: string }>) => {
      const ns = await namespaceWith('10');
      const [a, b] = await batched.reserveMany(ns, [
        { amount: '2', reference: 'above:a' },
        { amount: '2', reference: 'above:b' },
      ]);
      const charged = [(await settle(a, '5')).charged, (await settle(b, '7')).charged];
      const ledgerRows = await prisma.creditLedgerEntry.findMany({ where: { namespaceId: ns }, orderBy: { createdAt: 'asc' } });
      return { charged, balance: await row(ns), balances: ledgerRows.map((e) => e.balanceAfter.toFixed()) };
    };
    const plain = await outcome((r, actual) => ledger.settle(r.id, actual));
    const grouped = await outcome((r, actual) => batched.settle(r, actual));
    expect(plain).toEqual({ charged: ['5', '5'], balance: { credits: '0', reserved: '0' }, balances: ['5', '0'] });
    expect(grouped).toEqual(plain);

    // Settled together in one statement, arrival order decides who gets the free credits.
    const ns = await namespaceWith('4');
    const rs = await batched.reserveMany(ns, [1, 2, 3].map((i) => ({ amount: '1', reference: `together:${i}` })));
    const together = await Promise.all(rs.map((r) => batched.settle(r, '2')));
    expect(together.map((s) => s.charged)).toEqual(['2', '1', '1']);
    expect(await row(ns)).toEqual({ credits: '0', reserved: '0' });
  });

  it('does not let settle and release of the same reservation both apply', async () => {
    const ns = await namespaceWith('5');
    const rs = await Promise.all(Array.from({ length: 10 }, (_, i) => batched.reserve(ns, '0.5', `x${i}`)));
    const outcomes = await Promise.all(rs.flatMap((r) => [batched.settle(r, '0.5'), batched.release(r.id)]));
    const settledApplied = outcomes.filter((o, i) => i % 2 === 0 && (o as { applied: boolean }).applied).length;
    const released = outcomes.filter((o, i) => i % 2 === 1 && o === true).length;
    expect(settledApplied + released).toBe(10);
    expect(await row(ns)).toEqual({ credits: String(5 - settledApplied * 0.5), reserved: '0' });
  });

  it('stays exact with several replicas (and the plain ledger) working the same namespace at once', async () => {
    const ns = await namespaceWith('50');
    const other = new BatchedCreditLedger(ledger, { DATABASE_URL: env.databaseUrl });
    const replicas = [batched, other];
    const work = Array.from({ length: 120 }, async (_, i): Promise<number> => {
      const via = replicas[i % 2];
      try {
        const r = i % 3 === 0 ? await ledger.reserve(ns, '0.5', `p${i}`) : await via.reserve(ns, '0.5', `b${i}`);
        if (i % 5 === 0) await via.release(r.id);
        else await via.settle(r, '0.4');
        return i % 5 === 0 ? 0 : 0.4;
      } catch (err) {
        expect((err as ApiError).status).toBe(402);
        return 0;
      }
    });
    const charged = (await Promise.all(work)).reduce((a, b) => a + b, 0);
    await other.onModuleDestroy();
    const after = await row(ns);
    expect(after.reserved).toBe('0');
    expect(Number(after.credits)).toBeCloseTo(50 - charged, 6);
    expect(Number(after.credits)).toBeGreaterThanOrEqual(0);
  });

  it('keeps different namespaces apart and exact decimals', async () => {
    const [a, b] = await Promise.all([namespaceWith('0.3'), namespaceWith('1')]);
    const rs = await Promise.all([batched.reserve(a, '0.1', 'a1'), batched.reserve(a, '0.2', 'a2'), batched.reserve(b, '0.7', 'b1'), batched.reserve(b, '0.3', 'b2')]);
    await expect(batched.reserve(a, '0.000001', 'a3')).rejects.toMatchObject({ status: 402 });
    await Promise.all(rs.map((r) => batched.settle(r, r.amount)));
    expect(await ledger.balance(a)).toEqual({ credits: '0', reserved: '0', available: '0' });
    expect(await ledger.balance(b)).toEqual({ credits: '0', reserved: '0', available: '0' });
  });

  it("writes each request's record on its reservation with the charge or release, alone or in a batch (the chat_usage view)", async () => {
    const ns = await namespaceWith('100');
    const user = (await prisma.user.create({ data: { username: `u${Date.now()}${Math.random().toString(36).slice(2, 8)}` } })).id;
    const record = (i: number, over: Partial<RequestRecord> = {}): RequestRecord => ({
      outcome: 'succeeded',
      userId: user,
      provider: `upstream-${i}`,
      stream: i % 2 === 0,
      requestId: `req-${i}`,
      errorMessage: null,
      durationMs: 10 + i,
      ...over,
    });
    const alone = await batched.reserve(ns, '1', 'chat:chatcmpl-alone');
    await batched.settle(alone, '0.5', { inputTokens: 3, outputTokens: 4, request: record(0) });
    const many = await Promise.all(Array.from({ length: 12 }, (_, i) => batched.reserve(ns, '1', `chat:chatcmpl-${i}`)));
    const start = batched.stats.transactions;
    await Promise.all(many.slice(0, 10).map((r, i) => batched.settle(r, '0.25', { inputTokens: i, outputTokens: 1, request: record(i + 1) })));
    expect(statementsSince(start)).toBeLessThan(10);
    // An upstream's error text with a NUL, and a caller id that is no uuid: the release still lands.
    await batched.release(many[10].id, record(11, { outcome: 'failed', provider: null, errorMessage: 'HTTP 500: bad\u0000byte', userId: 'not-a-uuid' }));
    // A stale sweep knows no record: nothing about the request is invented.
    await batched.release(many[11].id);

    const rows = await prisma.$queryRaw<{ id: string; status: string; provider: string | null; stream: boolean; request_id: string; error_message: string | null; duration_ms: number; user_id: string | null; prompt_tokens: number; cost: string }[]>`
      SELECT id, status::text, provider, stream, request_id, error_message, duration_ms, user_id::text, prompt_tokens, cost::text FROM chat_usage WHERE namespace_id = ${ns}::uuid ORDER BY request_id`;
    expect(rows).toHaveLength(12);
    const byId = new Map(rows.map((r) => [r.id, r]));
    expect(byId.get('chatcmpl-alone')).toMatchObject({ status: 'succeeded', provider: 'upstream-0', stream: true, request_id: 'req-0', duration_ms: 10, user_id: user, prompt_tokens: 3, cost: '0.500000' });
    for (let i = 0; i < 10; i++)
      expect(byId.get(`chatcmpl-${i}`)).toMatchObject({ status: 'succeeded', provider: `upstream-${i + 1}`, stream: (i + 1) % 2 === 0, request_id: `req-${i + 1}`, duration_ms: 11 + i, prompt_tokens: i, cost: '0.250000' });
    expect(byId.get('chatcmpl-10')).toMatchObject({ status: 'failed', provider: null, error_message: 'HTTP 500: bad\uFFFDbyte', user_id: null, cost: '0.000000' });
    expect(byId.has('chatcmpl-11')).toBe(false);
    expect(await ledger.balance(ns)).toEqual({ credits: '97', reserved: '0', available: '97' });
  });

  it('keys what a paid request writes by time: its reservation and its charge get UUIDv7 ids, later ones sorting after earlier ones', async () => {
    const ns = await namespaceWith('100');
    // Rows Prisma creates take the same kind of key (schema.prisma: @default(uuid(7))).
    expect(uuidV7Time(ns)).toBeDefined();
    /** A step's reservation ids (minted here) and charge ids (minted by Postgres). */
    const idsOf = async (reservations: Reservation[]) => {
      const charges = await prisma.creditLedgerEntry.findMany({ where: { reservationId: { in: reservations.map((r) => r.id) } } });
      expect(charges).toHaveLength(reservations.length);
      return { reservations: reservations.map((r) => r.id), charges: charges.map((c) => c.id) };
    };
    const before = Date.now();
    // One settled alone (SETTLE_ONE_SQL), then a batch (SETTLE_SQL), then the plain ledger's path.
    const alone = await batched.reserve(ns, '1', 'alone');
    await batched.settle(alone, '0.5');
    const steps = [await idsOf([alone])];
    await nextMillisecond();
    const batch = await Promise.all(Array.from({ length: 20 }, (_, i) => batched.reserve(ns, '1', `b${i}`)));
    await Promise.all(batch.map((r) => batched.settle(r, '0.5')));
    steps.push(await idsOf(batch));
    await nextMillisecond();
    const plain = await ledger.reserve(ns, '1', 'plain');
    await ledger.settle(plain.id, '0.5');
    steps.push(await idsOf([plain]));
    const after = Date.now();
    for (const id of steps.flatMap((s) => [...s.reservations, ...s.charges])) {
      expect(uuidV7Time(id)).toBeGreaterThanOrEqual(before - 1_000);
      expect(uuidV7Time(id)).toBeLessThanOrEqual(after + 1_000);
    }
    // In Postgres's own order of uuids, each step's keys come after the step before's (compared
    // within one clock: the reservations' ids come from this process, the charges' from Postgres).
    for (const kind of ['reservations', 'charges'] as const) {
      const all = steps.flatMap((s) => s[kind]);
      const ordered = (await prisma.$queryRawUnsafe<{ id: string }[]>(`SELECT id::text AS id FROM unnest($1::uuid[]) AS t(id) ORDER BY id`, [...all].reverse())).map((r) => r.id);
      const stepOf = (id: string) => steps.findIndex((s) => s[kind].includes(id));
      expect(ordered.map(stepOf)).toEqual(all.map(stepOf));
    }
  });
});
