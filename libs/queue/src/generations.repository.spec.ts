import { randomUUID } from 'node:crypto';
import { PrismaService, SqlPool } from '@atelier/db';
import { uuidV7 } from '@atelier/random';
import { createTestEnvironment, createUserNamespace, type TestEnvironment } from '@atelier/testing';
import { GenerationsRepository, type NewGenerationRow } from './generations.repository';

/** The generations table as the queue's gateway side uses it, against a real Postgres. */
describe('GenerationsRepository', () => {
  let env: TestEnvironment;
  let prisma: PrismaService;
  let sql: SqlPool;
  let repo: GenerationsRepository;

  const tenant = () => createUserNamespace(prisma);
  const row = (t: { userId: string; namespaceId: string }, over: Partial<NewGenerationRow> = {}): NewGenerationRow => ({
    id: uuidV7(),
    namespaceId: t.namespaceId,
    ownerId: t.userId,
    modelName: 'local-image',
    mediaType: 'image',
    prompt: 'a lighthouse',
    params: { prompt: 'a lighthouse', seed: 7 },
    reservationId: randomUUID(),
    targetRepo: null,
    targetDirectory: null,
    priority: 'normal',
    ...over,
  });

  beforeAll(async () => {
    env = await createTestEnvironment({ LOG_LEVEL: 'silent' });
    prisma = new PrismaService(env.config);
    sql = new SqlPool(env.config);
    repo = new GenerationsRepository(prisma, sql);
  });
  afterAll(async () => {
    await sql?.onModuleDestroy();
    await prisma?.$disconnect();
    await env?.cleanup();
  });

  it('writes concurrent enqueues (one INSERT per batch) and reads each back with its namespace, times in Unix seconds', async () => {
    const t = await tenant();
    const a = [row(t), row(t)];
    const b = [row(t, { mediaType: 'video', modelName: 'local-video', priority: 'high', targetRepo: 'r', targetDirectory: 'd' })];
    await Promise.all([repo.insert(a), repo.insert(b)]);
    const read = await repo.read(b[0].id);
    expect(read).toMatchObject({ id: b[0].id, namespaceId: t.namespaceId, namespace: t.name, status: 'queued', mediaType: 'video', priority: 'high', targetRepo: 'r', cost: null });
    expect(read?.params).toEqual({ prompt: 'a lighthouse', seed: 7 });
    expect(Math.abs((read?.enqueuedAt ?? 0) - Date.now() / 1000)).toBeLessThan(60);
    expect(await repo.read(randomUUID())).toBeUndefined();
  });

  it("lists one namespace's generations, newest first, with the filters given and the count of all that match; never another's", async () => {
    const [mine, other] = [await tenant(), await tenant()];
    const rows = [row(mine), row(mine, { modelName: 'local-video', mediaType: 'video' }), row(mine, { targetRepo: 'gallery' })];
    for (const r of rows) await repo.insert([r]);
    // Apart by a second each, in insertion order: rows written in one millisecond tie, and then the
    // list orders them by id, which uuidv7 does not keep monotonic within a millisecond.
    for (const [k, r] of rows.entries()) await prisma.generation.update({ where: { id: r.id }, data: { enqueuedAt: new Date(Date.now() - (rows.length - k) * 1000) } });
    await repo.insert([row(other), row(other)]);
    await prisma.generation.update({ where: { id: rows[0].id }, data: { status: 'succeeded', completedAt: new Date() } });

    const active = await repo.list(mine.namespaceId, {}, 50, 0);
    expect(active.count).toBe(2);
    expect(active.rows.map((r) => r.id)).toEqual([rows[2].id, rows[1].id]);
    const all = await repo.list(mine.namespaceId, { status: 'queued,succeeded' }, 2, 0);
    expect(all.count).toBe(3);
    expect(all.rows).toHaveLength(2);
    expect((await repo.list(mine.namespaceId, { status: 'queued,succeeded' }, 2, 2)).rows.map((r) => r.id)).toEqual([rows[0].id]);
    expect((await repo.list(mine.namespaceId, { mediaType: 'video' }, 50, 0)).rows.map((r) => r.id)).toEqual([rows[1].id]);
    expect((await repo.list(mine.namespaceId, { repo: 'gallery' }, 50, 0)).rows.map((r) => r.id)).toEqual([rows[2].id]);
    expect((await repo.list(other.namespaceId, { status: 'queued,succeeded' }, 50, 0)).rows.every((r) => !rows.some((m) => m.id === r.id))).toBe(true);
  });

  it('cancels an active generation once, with its release in the same transaction, and leaves a terminal one as it is', async () => {
    const t = await tenant();
    const [queued, done] = [row(t, { params: { prompt: 'x', webhook: { url: 'https://example.com/h' } } }), row(t)];
    await repo.insert([queued, done]);
    await prisma.generation.update({ where: { id: done.id }, data: { status: 'succeeded', completedAt: new Date() } });

    const released: string[] = [];
    const cancel = () => repo.cancelActive(queued.id, { webhook: true, release: async (id) => released.push(id) });
    const results = await Promise.all([cancel(), cancel(), cancel()]);
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(released).toEqual([queued.reservationId]);
    expect((await repo.read(queued.id))?.status).toBe('cancelled');
    expect(await prisma.generationEvent.findUnique({ where: { generationId: queued.id } })).toMatchObject({ broadcast: false, payload: { generation_id: queued.id, status: 'cancelled' } });

    expect(await repo.cancelActive(done.id, { webhook: false, release: async (id) => released.push(id) })).toBe(false);
    expect((await repo.read(done.id))?.status).toBe('succeeded');
    expect(released).toHaveLength(1);
  });

  it('rolls the cancel back when the release fails: the generation stays active and no outbox row is left', async () => {
    const t = await tenant();
    const g = row(t);
    await repo.insert([g]);
    await expect(repo.cancelActive(g.id, { webhook: true, release: async () => Promise.reject(new Error('ledger down')) })).rejects.toThrow('ledger down');
    expect((await repo.read(g.id))?.status).toBe('queued');
    expect(await prisma.generationEvent.findUnique({ where: { generationId: g.id } })).toBeNull();
    expect(await repo.active([g.id, randomUUID()])).toEqual(new Set([g.id]));
  });
});
