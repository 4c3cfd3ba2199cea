import type { ApiKeyView } from '@atelier/accounts';
import { Prisma, PrismaService } from '@atelier/db';
import { createTenant, metricValue, waitFor, type Tenant } from '@atelier/testing';
import { startChatStack, type ChatStack } from './chat.harness';
import type { GatewayHarness } from './gateway.harness';

type MadeKey = ApiKeyView & { api_key: string };

interface UsageBody {
  namespace: string | null;
  from: string;
  to: string;
  split_by?: string;
  rows: { group: string | null; split?: string | null; requests: number; input_tokens: number; output_tokens: number; images: number; video_seconds: number; cost: string }[];
  total: { requests: number; input_tokens: number; output_tokens: number; cost: string };
}

/**
 * Governance through the real gateway (two replicas sharing Redis and Postgres) with the chat
 * service and a fake upstream: max_concurrent, budgets exact under concurrency, usage reports
 * that add up to the ledger's charges.
 */
describe('governance: max_concurrent, budgets, usage', () => {
  let stack: ChatStack;
  let replica: Awaited<ReturnType<GatewayHarness['replica']>>;
  let prisma: PrismaService;

  beforeAll(async () => {
    stack = await startChatStack();
    replica = await stack.gw.replica();
    prisma = stack.gw.app.get(PrismaService);
  });
  afterAll(() => stack?.close());

  const makeKey = async (t: Tenant, body: Record<string, unknown>) => {
    const res = await stack.gw.http.request<MadeKey>('POST', '/api/api_keys', { token: t.apiKey, body: { name: 'governed', ...body } });
    expect(res.status).toBe(201);
    return res.body;
  };
  const chat = (key: string, model = 'remote-echo', extra: Record<string, unknown> = {}, signal?: AbortSignal) =>
    fetch(`${stack.base}/api/ai/chat/completions`, {
      method: 'POST',
      signal,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello upstream' }], max_tokens: 20, ...extra }),
    });
  const enqueue = (key: string, via = stack.gw.http, body: Record<string, unknown> = {}) =>
    via.request<{ generations: { generation_id: string }[] }>('POST', '/api/ai/queue', { token: key, body: { model: 'local-image', prompt: 'a lighthouse', ...body } });
  const usage = (token: string, query: string) => stack.gw.http.request<UsageBody>('GET', `/api/usage?${query}`, { token });
  /** What the namespace's ledger charged, from the ledger itself. */
  const ledgerCharges = async (namespace: string) => {
    const [row] = await prisma.$queryRaw<{ charged: string | null }[]>`
      SELECT (-sum(l.amount))::text AS charged FROM credit_ledger l JOIN namespaces n ON n.id = l.namespace_id
      WHERE n.name = ${namespace} AND l.kind = 'charge'`;
    return new Prisma.Decimal(row.charged ?? 0).toFixed();
  };

  it('counts requests in flight and active generations against max_concurrent, on every replica, with a 429 and retry-after', async () => {
    const t = await createTenant(stack.gw.http, stack.gw.adminToken, '100');
    const key = await makeKey(t, { limits: { max_concurrent: 2 } });
    // Two streamed answers held open by the upstream (a chunk every 50 ms for a minute).
    const streams = [new AbortController(), new AbortController()];
    const open = await Promise.all(streams.map((c) => chat(key.api_key, 'remote-slow', { stream: true }, c.signal)));
    expect(open.map((r) => r.status)).toEqual([200, 200]);

    const third = await replica.http.request('POST', '/api/ai/chat/completions', {
      token: key.api_key,
      body: { model: 'remote-echo', messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(third.status).toBe(429);
    expect(third.headers['retry-after']).toBe('1');
    expect(third.body).toMatchObject({
      error: { type: 'rate_limited', message: `Concurrency limit reached: 2 request(s) or generation(s) in flight at once for API key ${key.prefix}; retry when one finishes` },
    });
    // The owner's other keys are not limited by this key's limit.
    expect((await chat(t.apiKey)).status).toBe(200);

    // A client that goes away frees its slot.
    streams[0].abort();
    const admitted = await waitFor(async () => ((r) => (r.status === 200 ? r : undefined))(await chat(key.api_key)), { timeoutMs: 5000, description: 'a freed slot' });
    await admitted.text();
    streams[1].abort();

    // Queued generations hold their slots until they end (no worker runs here: they stay queued).
    await waitFor(async () => (await enqueue(key.api_key, stack.gw.http, { num_generations: 2 })).status === 200, { timeoutMs: 5000, description: 'both slots free' });
    const full = await enqueue(key.api_key, replica.http);
    expect(full.status).toBe(429);
    expect((await chat(key.api_key)).status).toBe(429);
    const listed = await stack.gw.http.request<{ generations: { generation_id: string }[] }>('GET', '/api/ai/queue', { token: key.api_key });
    expect((await stack.gw.http.request('DELETE', `/api/ai/queue/${listed.body.generations[0].generation_id}`, { token: key.api_key })).status).toBe(200);
    const afterCancel = await chat(key.api_key);
    expect(afterCancel.status).toBe(200);
    await afterCancel.text();
  });

  it("applies the namespace's max_concurrent to all its keys, and finds generations that ended without giving their slot back", async () => {
    const t = await createTenant(stack.gw.http, stack.gw.adminToken, '100');
    const set = await stack.gw.http.request('PUT', `/api/admin/namespaces/${t.namespace}/limits`, { token: stack.gw.adminToken, body: { max_concurrent: 1 } });
    expect(set.body).toEqual({ namespace: t.namespace, limits: { rpm: null, read_rpm: null, tpm: null, max_concurrent: 1, queue_weight: 1, capture_rate: 0 } });
    expect((await stack.gw.http.request('POST', '/api/api_keys', { token: t.apiKey, body: { name: 'x', limits: { max_concurrent: 2 } } })).body).toMatchObject({
      error: { message: "limits.max_concurrent must not exceed the namespace's own limit of 1" },
    });
    const queued = await waitFor(async () => ((r) => (r.status === 200 ? r : undefined))(await enqueue(t.apiKey)), { description: 'the limit to reach the cached key' });
    const refused = await enqueue(t.apiKey, replica.http);
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ error: { message: expect.stringContaining(`in flight at once for namespace ${t.namespace}`) } });
    // The generation ends behind the limiter's back (as if its release were lost): the next
    // refusal checks the real state first, so the namespace is not blocked.
    await prisma.generation.update({ where: { id: queued.body.generations[0].generation_id }, data: { status: 'failed', completedAt: new Date() } });
    expect((await enqueue(t.apiKey, replica.http)).status).toBe(200);
  });

  it('never overspends a budget: 60 concurrent enqueues on two replicas against a budget for 20 admit exactly 20', async () => {
    const t = await createTenant(stack.gw.http, stack.gw.adminToken, '100');
    // local-image costs 0.01 per image: the budget covers exactly 20.
    const key = await makeKey(t, { budget: { max_spend: '0.2', period: 'total' } });
    const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => enqueue(key.api_key, i % 2 ? replica.http : stack.gw.http)));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(20);
    expect(statuses.filter((s) => s === 402)).toHaveLength(40);
    expect(answers.find((a) => a.status === 402)!.body).toMatchObject({
      error: { type: 'budget_exceeded', message: `Budget exceeded for key ${key.prefix}`, detail: { max_spend: '0.2', available: '0', required: '0.01' } },
    });
    const held = await prisma.apiKey.findUniqueOrThrow({ where: { prefix: key.prefix }, select: { budgetReserved: true, budgetSpent: true } });
    expect(held.budgetReserved.toFixed()).toBe('0.2');
    // The owner's other key still spends the namespace's credits.
    expect((await enqueue(t.apiKey)).status).toBe(200);
    // Cancelling gives the budget back.
    const one = answers.find((a) => a.status === 200)!.body.generations[0].generation_id;
    expect((await stack.gw.http.request('DELETE', `/api/ai/queue/${one}`, { token: key.api_key })).status).toBe(200);
    expect((await enqueue(key.api_key)).status).toBe(200);
    expect((await enqueue(key.api_key)).status).toBe(402);
  });

  it("refuses before any work, charges what was delivered against the budget, and starts each UTC day's budget afresh", async () => {
    const t = await createTenant(stack.gw.http, stack.gw.adminToken, '100');
    const broke = await makeKey(t, { budget: { max_spend: '0', period: 'day' } });
    const refused = await chat(broke.api_key);
    expect(refused.status).toBe(402);
    expect(await refused.json()).toMatchObject({ error: { type: 'budget_exceeded', message: `Budget exceeded for key ${broke.prefix}` } });

    const key = await makeKey(t, { budget: { max_spend: '1', period: 'day' } });
    const ok = await chat(key.api_key);
    expect(ok.status).toBe(200);
    await ok.text();
    const spent = await waitFor(
      async () => {
        const listed = await stack.gw.http.request<{ data: MadeKey[] }>('GET', '/api/api_keys', { token: t.apiKey });
        const b = listed.body.data.find((k) => k.prefix === key.prefix)!.budget!;
        return b.spent !== '0' ? b.spent : undefined;
      },
      { description: 'the charge to land' },
    );
    expect(spent).toBe(await ledgerCharges(t.namespace));

    // Spent up to the limit today: refused.
    const today = new Date().toISOString().slice(0, 10);
    await prisma.apiKey.update({ where: { prefix: key.prefix }, data: { budgetSpent: '1', budgetWindow: today } });
    expect((await chat(key.api_key)).status).toBe(402);
    // The same spend recorded yesterday: today starts at 0.
    const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
    await prisma.apiKey.update({ where: { prefix: key.prefix }, data: { budgetWindow: yesterday } });
    const fresh = await chat(key.api_key);
    expect(fresh.status).toBe(200);
    await fresh.text();
    // The new period is written when the request reserves, its charge when it settles, after the
    // answer is delivered: wait for the settle, or a reservation it never gave back times out here.
    const row = await waitFor(
      async () => {
        const r = await prisma.apiKey.findUniqueOrThrow({ where: { prefix: key.prefix } });
        return r.budgetWindow === today && r.budgetReserved.isZero() ? r : undefined;
      },
      { description: "the new period's settle" },
    );
    expect(Number(row.budgetSpent)).toBeGreaterThan(0);
    expect(Number(row.budgetSpent)).toBeLessThan(1);
  });

  describe('the hand-off overlapping the reservation for governed keys', () => {
    const metrics = async () => (await stack.gw.http.request('GET', '/metrics')).text;
    const count = async (name: string, labels?: Record<string, string>) => metricValue(await metrics(), name, labels) || 0;
    const overlapped = () => count('atelier_stage_duration_seconds_count', { stage: 'chat.reserve_overlapped' });
    const refusals = () => count('atelier_overlapped_refusals_total');
    const settled = (prefix: string) =>
      waitFor(async () => (await prisma.apiKey.findUniqueOrThrow({ where: { prefix } })).budgetReserved.isZero(), { description: 'the budget hold to be settled' });
    const ok = async (key: string, model?: string) => {
      const res = await chat(key, model);
      expect(res.status).toBe(200);
      await res.text();
    };

    it('overlaps for a key with ample budget and a max_concurrent limit; the slot is still taken before any work, and a budget cut later cancels the call', async () => {
      const t = await createTenant(stack.gw.http, stack.gw.adminToken, '100');
      const key = await makeKey(t, { budget: { max_spend: '10', period: 'month' }, limits: { max_concurrent: 1 } });
      // The first request finds how much the namespace and the budget can spend; the ones after overlap.
      await ok(key.api_key);
      await settled(key.prefix);
      const before = await overlapped();
      await ok(key.api_key);
      expect(await overlapped()).toBe(before + 1);
      await settled(key.prefix);

      // One answer held open takes the only slot: the next request is refused before anything starts.
      const held = new AbortController();
      const open = await chat(key.api_key, 'remote-slow', { stream: true }, held.signal);
      expect(open.status).toBe(200);
      const [calls, refusedBefore] = [stack.upstream.requests.length, await refusals()];
      const full = await chat(key.api_key);
      expect(full.status).toBe(429);
      expect(await full.json()).toMatchObject({ error: { type: 'rate_limited', message: expect.stringContaining('Concurrency limit reached: 1 request(s)') } });
      expect(await refusals()).toBe(refusedBefore);
      expect(stack.upstream.requests.length).toBe(calls);
      held.abort();
      await settled(key.prefix);

      // The budget is spent behind this gateway's back: the overlapped call is cancelled and
      // refused, nothing more is charged, and the request after it reserves first.
      await prisma.apiKey.update({ where: { prefix: key.prefix }, data: { budgetSpent: '10' } });
      const charged = await ledgerCharges(t.namespace);
      const cut = await chat(key.api_key);
      expect(cut.status).toBe(402);
      expect(await cut.json()).toMatchObject({ error: { type: 'budget_exceeded' } });
      expect(await refusals()).toBe(refusedBefore + 1);
      const again = await chat(key.api_key);
      expect(again.status).toBe(402);
      await again.text();
      expect(await refusals()).toBe(refusedBefore + 1);
      await settled(key.prefix);
      expect(await ledgerCharges(t.namespace)).toBe(charged);
    });

    it('reserves before any work when the key has less than 100 times the request\'s estimate left in its budget', async () => {
      const t = await createTenant(stack.gw.http, stack.gw.adminToken, '100');
      const roomy = await makeKey(t, { budget: { max_spend: '10', period: 'month' } });
      await ok(roomy.api_key);
      const { id: roomyId } = await prisma.apiKey.findUniqueOrThrow({ where: { prefix: roomy.prefix } });
      const { amount: estimate } = await prisma.creditReservation.findFirstOrThrow({ where: { apiKeyId: roomyId } });
      const tight = await makeKey(t, { budget: { max_spend: estimate.times(50).toFixed(), period: 'month' } });
      await ok(tight.api_key);
      await settled(tight.prefix);
      const before = await overlapped();
      await ok(tight.api_key);
      expect(await overlapped()).toBe(before);
      // The namespace has room for both: the roomy key overlaps.
      await ok(roomy.api_key);
      expect(await overlapped()).toBe(before + 1);
    });
  });

  it('reports usage by key, model, endpoint and day that adds up to the ledger charges, as JSON and CSV, to members only', async () => {
    const t = await createTenant(stack.gw.http, stack.gw.adminToken, '100');
    const other = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const k1 = await makeKey(t, { name: 'one' });
    const k2 = await makeKey(t, { name: 'two' });
    const answers = await Promise.all([chat(k1.api_key), chat(k1.api_key), chat(k1.api_key), chat(k2.api_key), chat(k2.api_key, 'local-chat')]);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    await Promise.all(answers.map((a) => a.text()));
    // Nothing delivered, nothing charged, not counted.
    const failed = await chat(k2.api_key, 'remote-all-down');
    expect(failed.status).toBe(502);
    await failed.text();

    const byKey = await waitFor(async () => ((r) => (r.body.total?.requests === 5 ? r.body : undefined))(await usage(t.apiKey, 'group_by=api_key')), {
      description: 'the five charges',
    });
    expect(byKey.namespace).toBe(t.namespace);
    expect(byKey.rows.map((r) => [r.group, r.requests])).toEqual([[k1.prefix, 3], [k2.prefix, 2]].sort((a, b) => String(a[0]).localeCompare(String(b[0]))));
    // remote-echo's upstream reports 21 prompt and 9 completion tokens for every answer.
    expect(byKey.rows.find((r) => r.group === k1.prefix)).toMatchObject({ input_tokens: 63, output_tokens: 27, images: 0, video_seconds: 0 });
    expect(byKey.total.cost).toBe(await ledgerCharges(t.namespace));
    expect(Number(byKey.total.cost)).toBeGreaterThan(0);

    const byModel = (await usage(t.apiKey, 'group_by=model')).body;
    expect(byModel.rows.map((r) => [r.group, r.requests])).toEqual([
      ['local-chat', 1],
      ['remote-echo', 4],
    ]);
    expect(byModel.total).toEqual(byKey.total);
    const byEndpoint = (await usage(t.apiKey, 'group_by=endpoint')).body;
    expect(byEndpoint.rows).toEqual([{ group: '/api/ai/chat/completions', ...byKey.total, images: 0, video_seconds: 0 }]);
    const byDay = (await usage(t.apiKey, `group_by=day&namespace=${t.namespace}`)).body;
    expect(byDay.rows.map((r) => r.group)).toEqual([new Date().toISOString().slice(0, 10)]);
    // Two dimensions: a series per model (the console's charts), adding up to the same total.
    const today = new Date().toISOString().slice(0, 10);
    const dayByModel = (await usage(t.apiKey, 'group_by=day&split_by=model')).body;
    expect(dayByModel.split_by).toBe('model');
    expect(dayByModel.rows.map((r) => [r.group, r.split, r.requests])).toEqual([
      [today, 'local-chat', 1],
      [today, 'remote-echo', 4],
    ]);
    expect(dayByModel.total).toEqual(byKey.total);
    const modelByKey = (await usage(t.apiKey, 'group_by=model&split_by=api_key')).body;
    expect(modelByKey.rows.find((r) => r.group === 'remote-echo' && r.split === k1.prefix)).toMatchObject({ requests: 3 });
    for (const bad of ['split_by=day', 'group_by=model&split_by=model', 'split_by=namespace'])
      expect({ bad, status: (await usage(t.apiKey, bad)).status }).toEqual({ bad, status: 400 });
    // A window that ends before the requests holds nothing.
    const before = (await usage(t.apiKey, `from=2020-01-01&to=${Math.floor(Date.now() / 1000) - 3600}`)).body;
    expect(before.total).toMatchObject({ requests: 0, cost: '0' });

    const csv = await fetch(`${stack.base}/api/usage?group_by=model&format=csv`, { headers: { authorization: `Bearer ${t.apiKey}` } });
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(csv.headers.get('content-disposition')).toMatch(/^attachment; filename="usage-.*\.csv"$/);
    const lines = (await csv.text()).trimEnd().split('\r\n');
    expect(lines[0]).toBe('group,requests,input_tokens,output_tokens,images,video_seconds,cost');
    expect(lines.slice(1)).toEqual(byModel.rows.map((r) => [r.group, r.requests, r.input_tokens, r.output_tokens, r.images, r.video_seconds, r.cost].join(',')));

    // Whole past days are summed once into a daily roll-up; reports read it and stay exact.
    // (The requests are moved back in time with their ledger entries, as if made days ago.)
    await prisma.$executeRaw`UPDATE credit_reservations SET closed_at = closed_at - interval '3 days', created_at = created_at - interval '3 days'
      WHERE namespace_id = (SELECT id FROM namespaces WHERE name = ${t.namespace})`;
    await prisma.$executeRaw`UPDATE credit_ledger SET created_at = created_at - interval '3 days'
      WHERE namespace_id = (SELECT id FROM namespaces WHERE name = ${t.namespace})`;
    // The reports above summed this month's past days while they were empty; no real request
    // lands in a past day, but this time travel did, so those sums are forgotten.
    await prisma.usageRollupDay.deleteMany({ where: { namespace: { name: t.namespace } } });
    await prisma.usageDaily.deleteMany({ where: { namespace: { name: t.namespace } } });
    const week = `from=${new Date(Date.now() - 7 * 86_400_000).toISOString().slice(0, 10)}`;
    const rolled = (await usage(t.apiKey, `${week}&group_by=api_key`)).body;
    expect(rolled.rows).toEqual(byKey.rows);
    expect(await prisma.usageDaily.count({ where: { namespace: { name: t.namespace } } })).toBe(3); // (k1, remote-echo), (k2, remote-echo), (k2, local-chat)
    expect((await usage(t.apiKey, `${week}&group_by=model`)).body.rows).toEqual(byModel.rows);
    expect(await prisma.usageDaily.count({ where: { namespace: { name: t.namespace } } })).toBe(3);
    // The roll-up keeps the day and the model apart: the series per model reads the same from it.
    const rolledSeries = (await usage(t.apiKey, `${week}&group_by=model&split_by=day`)).body;
    expect(rolledSeries.rows.map((r) => [r.group, r.split, r.requests])).toEqual([
      ['local-chat', new Date(Date.now() - 3 * 86_400_000).toISOString().slice(0, 10), 1],
      ['remote-echo', new Date(Date.now() - 3 * 86_400_000).toISOString().slice(0, 10), 4],
    ]);
    const threeDaysAgo = new Date(Date.now() - 3 * 86_400_000).toISOString().slice(0, 10);
    // A settle landing today is read from the requests themselves, beside the roll-up.
    const late = await chat(k1.api_key);
    await late.text();
    const withLate = await waitFor(async () => ((r) => (r.body.total.requests === 6 ? r.body : undefined))(await usage(t.apiKey, `${week}&group_by=day`)), {
      description: 'the late charge',
    });
    expect(withLate.rows.map((r) => [r.group, r.requests])).toEqual([
      [threeDaysAgo, 5],
      [new Date().toISOString().slice(0, 10), 1],
    ]);
    expect(withLate.total.cost).toBe(await ledgerCharges(t.namespace));

    // Members only; the operator sees every namespace.
    expect((await usage(other.apiKey, `namespace=${t.namespace}`)).status).toBe(403);
    const allWeek = await stack.gw.http.request<UsageBody>('GET', `/api/admin/usage?group_by=namespace&${week}`, { token: stack.gw.adminToken });
    expect(allWeek.body.namespace).toBeNull();
    const oneNamespace = await stack.gw.http.request<UsageBody>('GET', `/api/admin/usage?group_by=api_key&namespace=${t.namespace}&${week}`, { token: stack.gw.adminToken });
    expect(oneNamespace.body).toMatchObject({ namespace: t.namespace, total: withLate.total });
    expect((await stack.gw.http.request('GET', '/api/admin/usage?namespace=nobody-here', { token: stack.gw.adminToken })).status).toBe(404);
    expect(allWeek.body.rows.find((r) => r.group === t.namespace)).toMatchObject({ requests: 6, cost: withLate.total.cost });
    for (const [query, field] of [
      ['group_by=colour', 'group_by'],
      ['from=yesterday', 'from'],
      ['from=2026-02-01&to=2026-01-01', 'to'],
      ['format=xml', 'format'],
    ]) {
      const bad = await usage(t.apiKey, query);
      expect(bad.status).toBe(400);
      expect(bad.body).toMatchObject({ error: { detail: { fields: [expect.objectContaining({ field })] } } });
    }
  });
});
