import { Module } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { BillingModule, CreditLedger } from '@atelier/billing';
import { PrismaService } from '@atelier/db';
import { createService, ServiceRuntimeModule, UserEventLog } from '@atelier/runtime';
import { createTestEnvironment, createUserNamespace, type TestEnvironment } from '@atelier/testing';
import { FineTuneDataModule } from './fine-tune-data.module';
import { FineTuneRuns } from './fine-tune-runs.service';
import { FineTunesRepository } from './fine-tunes.repository';

/**
 * A run's money and its status events, against a real Postgres and Redis: whatever races, a run
 * is charged once, and each state it reaches is one event in the owner's stream.
 */
describe('FineTuneRuns', () => {
  let env: TestEnvironment;
  let app: NestFastifyApplication;
  let runs: FineTuneRuns;
  let fineTunes: FineTunesRepository;
  let prisma: PrismaService;
  let events: UserEventLog;

  beforeAll(async () => {
    env = await createTestEnvironment({ LOG_LEVEL: 'silent' });
    @Module({ imports: [BillingModule, FineTuneDataModule], providers: [FineTuneRuns] })
    class RunsTestModule {}
    app = await createService({ module: RunsTestModule, imports: [ServiceRuntimeModule.forRoot({ service: 'fine-tune-runs-test', config: env.config })] }, env.config, {
      service: 'fine-tune-runs-test',
    });
    runs = app.get(FineTuneRuns);
    fineTunes = app.get(FineTunesRepository);
    prisma = app.get(PrismaService);
    events = app.get(UserEventLog);
  });
  afterAll(async () => {
    await app?.close();
    await env?.cleanup();
  });

  /** A tenant with 10 credits and a tokenized run estimated at 2 (1M tokens of a 1-credit-per-million model), enqueued. */
  async function enqueuedRun() {
    const tenant = await createUserNamespace(prisma);
    await app.get(CreditLedger).adjust(tenant.namespaceId, '10', 'spec');
    const repo = await prisma.repository.create({ data: { namespaceId: tenant.namespaceId, name: 'data' } });
    const ft = await fineTunes.create({
      name: 'run',
      repositoryId: repo.id,
      namespaceId: tenant.namespaceId,
      createdById: tenant.userId,
      baseModel: 'meta-llama/Llama-3.2-3B-Instruct',
      scriptType: 'text_chat_messages',
      resource: 'main/train.parquet',
      trainingParams: {},
      state: 'tokenized',
      tokenization: { estimated_cost: '2' },
    });
    const enqueued = await runs.enqueue(ft, { namespaceId: tenant.namespaceId, namespace: tenant.name, keyPrefix: 'spec' });
    return { tenant, ft: enqueued };
  }

  const credits = async (namespaceId: string) => {
    const ns = await prisma.namespace.findUniqueOrThrow({ where: { id: namespaceId } });
    return { credits: ns.credits.toFixed(), reserved: ns.reserved.toFixed() };
  };
  const statuses = async (userId: string) => (await events.after<{ data: { id: string; status: string } }>(userId, '-')).events.map((e) => e.payload.data.status);

  it('holds the estimate while enqueued, and settles what was trained once when two ends race', async () => {
    const { tenant, ft } = await enqueuedRun();
    expect(ft.state).toBe('enqueued');
    expect(await credits(tenant.namespaceId)).toEqual({ credits: '10', reserved: '2' });
    const ended = await Promise.all([
      runs.end(ft.id, ['enqueued', 'running'], 'completed', { settle: { trainedTokens: 500_000 } }),
      runs.end(ft.id, ['enqueued', 'running'], 'completed', { settle: { trainedTokens: 500_000 } }),
    ]);
    expect(ended.filter(Boolean)).toHaveLength(1);
    // 0.5M tokens at 1 per million, the rest of the hold released.
    expect(await credits(tenant.namespaceId)).toEqual({ credits: '9.5', reserved: '0' });
    expect(ended.find(Boolean)).toMatchObject({ state: 'completed', trainedTokens: 500_000n });
    expect(await statuses(tenant.userId)).toEqual(['enqueued', 'completed']);
  });

  it('never charges beyond the estimate, and an end from a state the run has left changes nothing', async () => {
    const { tenant, ft } = await enqueuedRun();
    expect(await runs.end(ft.id, ['enqueued', 'running'], 'completed', { settle: { trainedTokens: 50_000_000 } })).toMatchObject({ state: 'completed' });
    expect(await credits(tenant.namespaceId)).toEqual({ credits: '8', reserved: '0' });
    expect(await runs.end(ft.id, ['enqueued', 'running'], 'errored', { release: true }, { error: 'late' })).toBeUndefined();
    expect(await runs.transition(ft.id, ['running'], 'enqueued')).toBeUndefined();
    expect(await fineTunes.byId(ft.id)).toMatchObject({ state: 'completed', errorMessage: null });
    expect(await credits(tenant.namespaceId)).toEqual({ credits: '8', reserved: '0' });
    expect(await statuses(tenant.userId)).toEqual(['enqueued', 'completed']);
  });

  it('a stop of an enqueued run releases everything; publishers racing on the outbox publish each event once', async () => {
    const { tenant, ft } = await enqueuedRun();
    const stopped = await runs.end(ft.id, ['enqueued'], 'stopped', { release: true }, { skipIfLeased: true });
    expect(stopped).toMatchObject({ state: 'stopped', creditsUsed: expect.anything() });
    expect(await credits(tenant.namespaceId)).toEqual({ credits: '10', reserved: '0' });
    // A crashed publisher's events are published by the sweeper; several sweepers at once still publish each once.
    await prisma.fineTuneEvent.updateMany({ where: { fineTuneId: ft.id }, data: { publishedAt: null } });
    await Promise.all([runs.publishPending(ft.id), runs.publishPending(ft.id), runs.publishPending(ft.id)]);
    expect(await statuses(tenant.userId)).toEqual(['enqueued', 'stopped']);
    expect(await prisma.fineTuneEvent.count({ where: { fineTuneId: ft.id, publishedAt: null } })).toBe(0);
  });
});
