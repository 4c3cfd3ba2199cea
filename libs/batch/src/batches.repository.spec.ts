import { Module } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { BillingModule, CreditLedger } from '@atelier/billing';
import { PrismaService } from '@atelier/db';
import { uuidV7 } from '@atelier/random';
import { createService, ServiceRuntimeModule } from '@atelier/runtime';
import { createTestEnvironment, createUserNamespace, type TestEnvironment } from '@atelier/testing';
import { BatchesRepository, type LineEnding } from './batches.repository';

const ENDED: LineEnding = { status: 'succeeded', response: { status_code: 200, request_id: 'r', body: {} }, error: null, inputTokens: 3, outputTokens: 4 };

/**
 * The guards a batch's exactly-once rests on, against the real Postgres: a line is claimed only
 * while its batch runs, ended once whatever races, and a cancel takes only the lines not started.
 */
describe('BatchesRepository', () => {
  let env: TestEnvironment;
  let app: NestFastifyApplication;
  let batches: BatchesRepository;
  let prisma: PrismaService;
  let ledger: CreditLedger;

  beforeAll(async () => {
    env = await createTestEnvironment({ LOG_LEVEL: 'silent' });
    @Module({ imports: [BillingModule], providers: [BatchesRepository] })
    class BatchesTestModule {}
    app = await createService({ module: BatchesTestModule, imports: [ServiceRuntimeModule.forRoot({ service: 'batches-test', config: env.config })] }, env.config, { service: 'batches-test' });
    batches = app.get(BatchesRepository);
    prisma = app.get(PrismaService);
    ledger = app.get(CreditLedger);
  });
  afterAll(async () => {
    await app?.close();
    await env?.cleanup();
  });

  /** A running batch of `n` pending lines, each with its reservation of 0.01 taken. */
  async function runningBatch(n: number) {
    const tenant = await createUserNamespace(prisma);
    await ledger.adjust(tenant.namespaceId, '10', 'spec');
    const id = uuidV7();
    await batches.create({ id, namespaceId: tenant.namespaceId, userId: tenant.userId, keyPrefix: 'spec', endpoint: '/v1/chat/completions', inputFileId: uuidV7(), completionWindow: '24h', status: 'in_progress', requestId: 'spec', expiresAt: new Date(Date.now() + 3600_000) });
    const lines = Array.from({ length: n }, (_, i) => ({ id: uuidV7(), lineNo: i + 1, customId: `c${i}`, model: 'local-chat', body: {}, reservationId: uuidV7() }));
    await batches.inTransaction(async (tx) => {
      await batches.insertLines(id, lines, tx);
      await ledger.reserveBatch(tenant.namespaceId, lines.map((l) => ({ id: l.reservationId, amount: '0.01', reference: `batch:${id}:${l.lineNo}` })), tx);
    });
    return { tenant, id, lines };
  }

  it('ends a line once when two attempts end it at once, and only the winner may settle', async () => {
    const { id, lines } = await runningBatch(1);
    expect(await batches.claim(lines[0].id)).toMatchObject({ id: lines[0].id, status: 'running', attempts: 1 });
    // A worker taken for dead claims it again (its job came back): the same line, a second attempt.
    expect(await batches.claim(lines[0].id)).toMatchObject({ status: 'running', attempts: 2 });
    const ends = await Promise.all([1, 2, 3].map(() => batches.inTransaction((tx) => batches.finish(lines[0].id, ENDED, tx))));
    expect(ends.filter(Boolean)).toHaveLength(1);
    expect(await batches.claim(lines[0].id)).toBeNull();
    expect(await batches.tally(id)).toMatchObject({ total: 1, completed: 1, open: 0, inputTokens: 3, outputTokens: 4 });
  });

  it('drops only the lines not started on a cancel, and claims nothing new once the batch is cancelling', async () => {
    const { tenant, id, lines } = await runningBatch(4);
    await batches.claim(lines[0].id);
    const dropped = await batches.inTransaction(async (tx) => {
      expect(await batches.transition(id, ['in_progress'], 'cancelling', { cancellingAt: new Date() }, tx)).toBe(true);
      const reservations = await batches.dropPending(id, 'cancelled', { code: 'batch_cancelled', message: 'x' }, tx);
      for (const r of reservations) await ledger.release(r, tx);
      return reservations;
    });
    expect(dropped.sort()).toEqual(lines.slice(1).map((l) => l.reservationId).sort());
    // A second cancel moves nothing.
    expect(await batches.transition(id, ['in_progress'], 'cancelling')).toBe(false);
    // The dropped lines cannot be claimed; the running one finishes and is kept.
    for (const l of lines.slice(1)) expect(await batches.claim(l.id)).toBeNull();
    expect(await batches.inTransaction((tx) => batches.finish(lines[0].id, ENDED, tx))).toBe(true);
    expect(await batches.tally(id)).toMatchObject({ total: 4, completed: 1, failed: 3, open: 0 });
    expect(await batches.hasOpenLines(id)).toBe(false);
    // Only the running line's 0.01 is still held (until it settles).
    expect((await ledger.balance(tenant.namespaceId)).reserved).toBe('0.01');
    expect([...(await batches.reservationsInUse(lines.map((l) => l.reservationId)))]).toEqual([]);
  });
});
