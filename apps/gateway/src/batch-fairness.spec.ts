import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { toFile } from 'openai';
import { PrismaService } from '@atelier/db';
import { createTenant, waitFor, type Tenant } from '@atelier/testing';
import { startBatchWorker } from './batch.harness';
import { batchUuid } from '@atelier/batch';
import { startChatStack, type ChatStack } from './chat.harness';

const LINES = 2000;
const POOL = 4;

const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];

/**
 * A 2,000-line batch beside interactive traffic: the batch holds at most its pool's slots, a
 * small batch of another namespace is not queued behind it, and interactive requests of the
 * batch's own namespace and of another go straight through while it runs.
 */
describe('a 2,000-line batch beside interactive traffic', () => {
  let stack: ChatStack;
  let worker: NestFastifyApplication;
  let big: Tenant;
  let small: Tenant;
  let interactive: Tenant;

  beforeAll(async () => {
    stack = await startChatStack({ BATCH_WORKER_CONCURRENCY: String(POOL), BATCH_SWEEP_INTERVAL_MS: '500' });
    worker = await startBatchWorker(stack);
    big = await createTenant(stack.gw.http, stack.gw.adminToken, '100');
    small = await createTenant(stack.gw.http, stack.gw.adminToken, '100');
    interactive = await createTenant(stack.gw.http, stack.gw.adminToken, '100');
  }, 60_000);
  afterAll(async () => {
    await worker?.close();
    await stack?.close();
  });

  const submit = async (t: Tenant, lines: number, prefix: string) => {
    const jsonl = Array.from({ length: lines }, (_, i) => JSON.stringify({ custom_id: `${prefix}-${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'remote-quick', messages: [{ role: 'user', content: `${prefix} ${i}` }], max_tokens: 16 } })).join('\n');
    const file = await stack.client(t.apiKey).files.create({ file: await toFile(Buffer.from(jsonl), `${prefix}.jsonl`), purpose: 'batch' });
    return stack.client(t.apiKey).batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
  };
  /** One interactive chat request's time, in ms. */
  const chat = async (t: Tenant) => {
    const started = performance.now();
    const res = await stack.client(t.apiKey).chat.completions.create({ model: 'remote-echo', messages: [{ role: 'user', content: 'interactive' }], max_tokens: 16 });
    expect(res.choices[0].message.content).toBe('Echo: interactive');
    return performance.now() - started;
  };
  const rounds = async (n: number) => {
    const own: number[] = [];
    const others: number[] = [];
    for (let i = 0; i < n; i++) {
      own.push(await chat(big));
      others.push(await chat(interactive));
    }
    return { own, others };
  };

  it('keeps the batch within its pool, lets a small batch of another namespace through, and interactive requests of both namespaces through at their idle pace', async () => {
    // Each namespace's interactive figure, with nothing else running.
    await rounds(5);
    const idle = await rounds(40);

    const prisma = stack.gw.app.get(PrismaService);
    const large = await submit(big, LINES, 'big');
    const uuid = batchUuid(large.id)!;
    const open = async () => prisma.batchLine.count({ where: { batchId: uuid, status: { in: ['pending', 'running'] } } });
    await waitFor(async () => (await stack.client(big.apiKey).batches.retrieve(large.id)).status === 'in_progress', { timeoutMs: 30_000, description: 'the batch to run' });

    // How many of its lines run at once, sampled while it runs: never more than the pool.
    let most = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        most = Math.max(most, await prisma.batchLine.count({ where: { batchId: uuid, status: 'running' } }));
        await new Promise((r) => setTimeout(r, 10));
      }
    })();

    // A namespace with ten lines goes next in the fair order, not after the 2,000.
    const few = await submit(small, 10, 'few');
    const fewDone = await waitFor(
      async () => {
        const b = await stack.client(small.apiKey).batches.retrieve(few.id);
        return b.status === 'completed' ? b : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 50, description: 'the small batch' },
    );
    expect(fewDone.request_counts).toEqual({ total: 10, completed: 10, failed: 0 });
    const leftWhenSmallDone = await open();
    expect(leftWhenSmallDone).toBeGreaterThan(LINES / 2);

    // Interactive requests while the batch runs: its own namespace's and another's.
    const busy = await rounds(40);
    const leftAfterInteractive = await open();
    sampling = false;
    await sampler;
    // They ran while the batch still had lines waiting: nothing of theirs waited for it to finish.
    expect(leftAfterInteractive).toBeGreaterThan(0);
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(POOL);
    // Within their idle figure: the batch takes its pool's slots of the chat service, not the interactive requests' turn.
    // (Generous bounds for a shared, noisy machine: bench:batch measures the real difference.)
    for (const [name, before, during] of [
      ['own', idle.own, busy.own],
      ['other', idle.others, busy.others],
    ] as const) {
      const figure = { namespace: name, p50: percentile(during, 50), bound: percentile(before, 50) * 3 + 25 };
      expect(figure.p50).toBeLessThanOrEqual(figure.bound);
    }

    const done = await waitFor(
      async () => {
        const b = await stack.client(big.apiKey).batches.retrieve(large.id);
        return b.status === 'completed' ? b : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 250, description: 'the 2,000-line batch' },
    );
    expect(done.request_counts).toEqual({ total: LINES, completed: LINES, failed: 0 });
  }, 180_000);
});
