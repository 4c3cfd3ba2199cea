import { ApiError } from '@atelier/contracts';
import { createPrismaClient, type PrismaClient, type PrismaService } from '@atelier/db';
import { createTestEnvironment, type TestEnvironment } from '@atelier/testing';
import { CreditLedger } from './credit-ledger.service';
import { ledgerFixtures } from './ledger-fixtures.harness';

describe('CreditLedger (real Postgres)', () => {
  let env: TestEnvironment;
  let prisma: PrismaClient;
  let ledger: CreditLedger;

  const { namespaceWith, row } = ledgerFixtures(() => prisma);

  beforeAll(async () => {
    env = await createTestEnvironment();
    prisma = createPrismaClient(env.databaseUrl, 40);
    ledger = new CreditLedger(prisma as unknown as PrismaService);
  });
  afterAll(async () => {
    await prisma?.$disconnect();
    await env?.cleanup();
  });

  it('lets exactly as many concurrent reservations succeed as the balance allows', async () => {
    const ns = await namespaceWith('10');
    const attempts = 60;
    const results = await Promise.allSettled(
      Array.from({ length: attempts }, (_, i) => ledger.reserve(ns, '0.5', `req-${i}`)),
    );
    const ok = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r) => r.status === 'rejected');
    expect(ok).toHaveLength(20);
    expect(refused).toHaveLength(attempts - 20);
    for (const r of refused) {
      const err = (r as PromiseRejectedResult).reason as ApiError;
      expect(err).toBeInstanceOf(ApiError);
      expect(err.status).toBe(402);
      expect(err.message).toMatch(/Insufficient credits: this request needs 0.5 credits but only 0 are available/);
    }
    expect(await row(ns)).toEqual({ credits: '10', reserved: '10' });
    expect(await prisma.creditReservation.count({ where: { namespaceId: ns, status: 'open' } })).toBe(20);
  });

  it('never lets concurrent settles push credits below zero, even when costs exceed estimates', async () => {
    const ns = await namespaceWith('3');
    const reservations = await Promise.all([1, 2, 3].map((i) => ledger.reserve(ns, '1', `r${i}`)));
    // Each actual cost (5) is far above its reservation and the balance.
    const settled = await Promise.all(reservations.map((r) => ledger.settle(r.id, '5')));
    expect(settled.map((s) => s.charged).sort()).toEqual(['1', '1', '1']);
    expect(await row(ns)).toEqual({ credits: '0', reserved: '0' });
  });

  it('settles the actual cost once, however often settle is retried', async () => {
    const ns = await namespaceWith('5');
    const r = await ledger.reserve(ns, '2', 'job');
    const attempts = await Promise.all([ledger.settle(r.id, '1.25'), ledger.settle(r.id, '1.25'), ledger.settle(r.id, '1.25')]);
    expect(attempts.filter((a) => a.applied)).toHaveLength(1);
    expect(attempts.every((a) => a.charged === '1.25')).toBe(true);
    expect(await row(ns)).toEqual({ credits: '3.75', reserved: '0' });
    const entries = await prisma.creditLedgerEntry.findMany({ where: { namespaceId: ns } });
    expect(entries.map((e) => [e.kind, e.amount.toFixed(), e.balanceAfter.toFixed()])).toEqual([['charge', '-1.25', '3.75']]);
    // A settled reservation cannot be released afterwards (no refund of a charge by mistake).
    expect(await ledger.release(r.id)).toBe(false);
  });

  it('records the usage a settle delivered on its reservation, inside a caller\'s transaction too (a queued generation settles that way)', async () => {
    const ns = await namespaceWith('10');
    const r = await ledger.reserve(ns, '4', 'generation:usage', prisma as unknown as PrismaService, { model: 'video-model', endpoint: '/api/ai/generations' });
    const settled = await prisma.$transaction((tx) => ledger.settle(r.id, '3.5', tx, { images: 2, videoSeconds: 2.5, inputTokens: 7 }));
    expect(settled).toEqual({ reservationId: r.id, charged: '3.5', applied: true });
    const stored = await prisma.creditReservation.findUniqueOrThrow({ where: { id: r.id } });
    expect({ status: stored.status, charged: stored.charged?.toFixed(), images: stored.images, videoSeconds: stored.videoSeconds.toFixed(), inputTokens: stored.inputTokens, outputTokens: stored.outputTokens, model: stored.model }).toEqual({
      status: 'settled',
      charged: '3.5',
      images: 2,
      videoSeconds: '2.5',
      inputTokens: 7,
      outputTokens: 0,
      model: 'video-model',
    });
    expect(await row(ns)).toEqual({ credits: '6.5', reserved: '0' });
  });

  it('releases a reservation once and gives the credits back', async () => {
    const ns = await namespaceWith('1');
    const r = await ledger.reserve(ns, '1', 'job');
    await expect(ledger.reserve(ns, '0.000001', 'other')).rejects.toMatchObject({ status: 402 });
    const results = await Promise.all([ledger.release(r.id), ledger.release(r.id)]);
    expect(results.sort()).toEqual([false, true]);
    expect(await row(ns)).toEqual({ credits: '1', reserved: '0' });
    expect((await ledger.settle(r.id, '1')).applied).toBe(false);
    expect(await row(ns)).toEqual({ credits: '1', reserved: '0' });
  });

  it('keeps exact decimals', async () => {
    const ns = await namespaceWith('0.3');
    const a = await ledger.reserve(ns, '0.1', 'a');
    const b = await ledger.reserve(ns, '0.2', 'b');
    await ledger.settle(a.id, '0.1');
    await ledger.settle(b.id, '0.2');
    expect(await ledger.balance(ns)).toEqual({ credits: '0', reserved: '0', available: '0' });
  });

  it('refuses operator adjustments that would undercut open reservations', async () => {
    const ns = await namespaceWith('2');
    await ledger.reserve(ns, '1.5', 'job');
    await expect(ledger.adjust(ns, '-1', 'oops')).rejects.toMatchObject({ status: 400 });
    expect((await ledger.adjust(ns, '-0.5', 'fix')).credits).toBe('1.5');
  });

  it('releases only stale reservations of the given kind', async () => {
    const ns = await namespaceWith('10');
    const old = await ledger.reserve(ns, '1', 'chat:old');
    const fresh = await ledger.reserve(ns, '1', 'chat:fresh');
    const otherKind = await ledger.reserve(ns, '1', 'generation:old');
    await prisma.$executeRaw`UPDATE credit_reservations SET created_at = now() - interval '2 hours' WHERE id IN (${old.id}::uuid, ${otherKind.id}::uuid)`;
    expect(await ledger.releaseStale({ prefix: 'chat:', maxAgeMs: 3600_000 })).toBe(1);
    const statuses = await prisma.creditReservation.findMany({ where: { namespaceId: ns }, orderBy: { reference: 'asc' } });
    expect(statuses.map((r) => [r.reference, r.status])).toEqual([
      ['chat:fresh', 'open'],
      ['chat:old', 'released'],
      ['generation:old', 'open'],
    ]);
    expect(await row(ns)).toEqual({ credits: '10', reserved: '2' });
    expect(await ledger.releaseStale({ prefix: 'chat:', maxAgeMs: 3600_000 })).toBe(0);
    await ledger.release(fresh.id);
    await ledger.release(otherKind.id);
  });
});
