import { QUEUE_WEIGHTS_KEY } from '@atelier/contracts';
import { RedisService } from '@atelier/runtime';
import { createTestEnvironment, type TestEnvironment } from '@atelier/testing';
import { QueuePositions } from './queue-positions';

/**
 * The fair queue's scripts (lua/queue-*.lua) against a real Redis, without a worker: where each
 * namespace's generations land in the pool's order. The gateway's fair-queue.spec.ts checks the
 * same order end to end, through real workers.
 */
describe('QueuePositions (fair-queue scripts)', () => {
  let env: TestEnvironment;
  let redis: RedisService;
  let positions: QueuePositions;
  let n = 0;
  /** A fresh pool per test would need a fresh prefix; fresh namespace and generation ids do the same. */
  const ns = () => `ns-${process.pid}-${++n}`;
  const gen = (label: string) => `${label}-${++n}`;

  async function order(pool: 'image' | 'video', ids: string[]): Promise<string[]> {
    const at = await positions.positions(ids.map((id) => ({ id, pool })));
    return [...ids].filter((id) => at.get(id) !== null).sort((a, b) => (at.get(a) as number) - (at.get(b) as number));
  }

  beforeAll(async () => {
    env = await createTestEnvironment({ LOG_LEVEL: 'silent' });
    redis = new RedisService(env.config);
    positions = new QueuePositions(redis);
  });
  afterAll(async () => {
    await redis?.client.quit();
    await env?.cleanup();
  });

  it("puts a namespace's first generation right after the round in progress, however long another's backlog", async () => {
    const [busy, quiet] = [ns(), ns()];
    const backlog = [gen('busy'), gen('busy'), gen('busy'), gen('busy')];
    await positions.add('image', backlog.map((id) => ({ id, namespaceId: busy })));
    const late = gen('quiet');
    await positions.add('image', [{ id: late, namespaceId: quiet }]);
    expect(await order('image', [...backlog, late])).toEqual([backlog[0], late, ...backlog.slice(1)]);
  });

  it('shares places in proportion to the namespaces’ weights', async () => {
    const [heavy, light] = [ns(), ns()];
    await redis.client.hset(redis.names.key(QUEUE_WEIGHTS_KEY), heavy, '2');
    const h = [gen('h'), gen('h'), gen('h'), gen('h')];
    const l = [gen('l'), gen('l')];
    // Interleaved arrival; the order follows the weights, not the arrival.
    await positions.add('video', [...l, ...h].map((id) => ({ id, namespaceId: id.startsWith('h') ? heavy : light })));
    const got = await order('video', [...h, ...l]);
    expect(got.slice(0, 3).filter((id) => id.startsWith('h'))).toHaveLength(2);
    expect(got.filter((id) => id.startsWith('h'))).toEqual(h);
    expect(got.filter((id) => id.startsWith('l'))).toEqual(l);
  });

  it("lets a high-priority generation take its own namespace's earliest place, never another's", async () => {
    const [mine, other] = [ns(), ns()];
    const a1 = gen('a');
    const b1 = gen('b');
    const a2 = gen('a');
    await positions.add('image', [
      { id: a1, namespaceId: mine },
      { id: b1, namespaceId: other },
      { id: a2, namespaceId: mine },
    ]);
    const before = await order('image', [a1, b1, a2]);
    const urgent = gen('urgent');
    const { priorities, moved } = await positions.add('image', [{ id: urgent, namespaceId: mine, priority: 'high' }]);
    expect(priorities).toHaveLength(1);
    // It takes a1's place; a1 and a2 move one place on each; b1 keeps its place relative to them.
    expect(moved.map((m) => m.id).sort()).toEqual([a1, a2].sort());
    const after = await order('image', [a1, b1, a2, urgent]);
    expect(after.indexOf(urgent)).toBe(before.indexOf(a1));
    expect(after.indexOf(b1) - after.indexOf(urgent)).toBe(before.indexOf(b1) - before.indexOf(a1));
  });

  it('keeps the place of a generation placed again (a re-dispatch after a loss)', async () => {
    const [x, y] = [ns(), ns()];
    const first = gen('x');
    await positions.add('image', [{ id: first, namespaceId: x }]);
    const [before] = (await positions.add('image', [{ id: first, namespaceId: x }])).priorities;
    await positions.add('image', [{ id: gen('y'), namespaceId: y }]);
    const [again] = (await positions.add('image', [{ id: first, namespaceId: x }])).priorities;
    expect(again).toBe(before);
  });

  it('gives a cancelled place back, so the namespace’s next generation does not wait behind nobody', async () => {
    const [x, y] = [ns(), ns()];
    const xs = [gen('x'), gen('x')];
    const ys = [gen('y'), gen('y'), gen('y')];
    await positions.add('video', [...xs.map((id) => ({ id, namespaceId: x })), ...ys.map((id) => ({ id, namespaceId: y }))]);
    await positions.remove('video', xs[1], x);
    expect((await positions.positions([{ id: xs[1], pool: 'video' }])).get(xs[1])).toBeNull();
    const next = gen('x');
    await positions.add('video', [{ id: next, namespaceId: x }]);
    // It takes the cancelled one's place (second round), not a third round after ys[1].
    const got = await order('video', [...xs, ...ys, next]);
    expect(got.indexOf(next)).toBeLessThan(got.indexOf(ys[2]));
  });

  it('moves the virtual time when a worker starts one: a newcomer goes after the round in progress, not before it', async () => {
    const [x, y] = [ns(), ns()];
    const xs = [gen('x'), gen('x'), gen('x')];
    await positions.add('image', xs.map((id) => ({ id, namespaceId: x })));
    await positions.started('image', xs[0], x);
    await positions.started('image', xs[1], x);
    expect(await positions.waitingNamespaces('image')).toContain(x);
    const newcomer = gen('y');
    await positions.add('image', [{ id: newcomer, namespaceId: y }]);
    expect(await order('image', [xs[2], newcomer])).toEqual([xs[2], newcomer]);
    await positions.remove('image', xs[2], x);
    expect(await positions.waitingNamespaces('image')).not.toContain(x);
  });
});
