import OpenAI from 'openai';
import { createTenant, type Tenant, openAiError } from '@atelier/testing';
import { adaptiveWeights } from '@atelier/chat';
import { startChatStack, type ChatStack } from './chat.harness';

interface VariantStats {
  model: string;
  weight: number;
  requests: number;
  failed: number;
  latency_ms: { p50: number | null; p95: number | null };
  cost: { total: string; per_request: string | null };
  metric: { count: number; mean: number | null; ci95: [number, number] | null } | null;
}
interface ExperimentDetail {
  name: string;
  status: string;
  promoted_model: string | null;
  variants: VariantStats[];
  history: { type: string; variants: { model: string; weight: number }[]; model?: string }[];
}

/**
 * Experiments (POST /api/ai/experiments): a name of the namespace that splits its requests
 * between variants, sticky per user, with per-variant statistics; adaptive weights that follow
 * feedback on a metric; promote; and no namespace routing to, reading or changing another's.
 */
describe('experiments (/api/ai/experiments)', () => {
  let stack: ChatStack;
  let owner: Tenant;
  let other: Tenant;
  const client = (t: Tenant) => stack.client(t.apiKey);
  const http = <T = Record<string, unknown>>(t: Tenant, method: 'GET' | 'POST' | 'DELETE', url: string, body?: unknown) => stack.gw.http.request<T>(method, url, { token: t.apiKey, body });
  const ask = (t: Tenant, model: string, extra: Record<string, unknown> = {}) =>
    client(t)
      .chat.completions.create({ model, messages: [{ role: 'user', content: 'which variant answers?' }], ...extra } as OpenAI.ChatCompletionCreateParamsNonStreaming)
      .withResponse();
  const detail = async (t: Tenant, name: string) => (await http<ExperimentDetail>(t, 'GET', `/api/ai/experiments/${name}`)).body;
  const variant = (d: ExperimentDetail, model: string) => d.variants.find((v) => v.model === model)!;

  beforeAll(async () => {
    stack = await startChatStack();
    owner = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
    other = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('splits requests between the variants, keeps each user on one, and reports requests, latency and cost per variant', async () => {
    const made = await http(owner, 'POST', '/api/ai/experiments', {
      name: 'support-bot',
      variants: [
        { model: 'remote-echo', weight: 0.5 },
        { model: 'remote-quick', weight: 0.5 },
      ],
      sticky_by: 'user',
    });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({ object: 'experiment', name: 'support-bot', namespace: owner.namespace, mode: 'fixed', status: 'running', metric: null, sticky_by: 'user' });

    const seen = new Map<string, string>();
    for (let u = 0; u < 16; u++)
      for (let again = 0; again < 2; again++) {
        const { data, response } = await ask(owner, 'support-bot', { user: `user-${u}` });
        const routed = response.headers.get('x-atelier-variant')!;
        expect(['remote-echo', 'remote-quick']).toContain(routed);
        expect(response.headers.get('x-atelier-experiment')).toBe('support-bot');
        expect(data.model).toBe(routed);
        if (seen.has(`user-${u}`)) expect(routed).toBe(seen.get(`user-${u}`));
        seen.set(`user-${u}`, routed);
      }
    // 16 users at 50/50 all on one variant would be a 1-in-32,768 chance.
    expect(new Set(seen.values()).size).toBe(2);

    const d = await detail(owner, 'support-bot');
    const onEcho = [...seen.values()].filter((m) => m === 'remote-echo').length * 2;
    expect(variant(d, 'remote-echo').requests).toBe(onEcho);
    expect(variant(d, 'remote-quick').requests).toBe(32 - onEcho);
    // remote-quick's upstream takes 20 ms an answer, remote-echo's none.
    expect(variant(d, 'remote-quick').latency_ms.p50!).toBeGreaterThanOrEqual(20);
    expect(variant(d, 'remote-quick').latency_ms.p95!).toBeGreaterThanOrEqual(variant(d, 'remote-quick').latency_ms.p50!);
    expect(variant(d, 'remote-quick').latency_ms.p50!).toBeGreaterThan(variant(d, 'remote-echo').latency_ms.p50!);
    expect(Number(variant(d, 'remote-echo').cost.total)).toBeGreaterThan(0);
    expect(variant(d, 'remote-echo').metric).toBeNull();
    expect(d.history.map((h) => h.type)).toEqual(['created']);

    // A stream through the experiment names its variant too.
    const { data: stream, response } = await client(owner)
      .chat.completions.create({ model: 'support-bot', messages: [{ role: 'user', content: 'stream it' }], stream: true, user: 'user-0' })
      .withResponse();
    const models = new Set<string>();
    for await (const chunk of stream) models.add(chunk.model);
    expect(response.headers.get('x-atelier-variant')).toBe(seen.get('user-0'));
    expect([...models]).toEqual([seen.get('user-0')]);
    expect((await detail(owner, 'support-bot')).variants.reduce((n, v) => n + v.requests, 0)).toBe(33);

    // The Responses API routes by the same experiment.
    const { data: response2, response: raw } = await client(owner).responses.create({ model: 'support-bot', input: 'and through responses?', user: 'user-0' }).withResponse();
    expect(raw.headers.get('x-atelier-variant')).toBe(seen.get('user-0'));
    expect(response2.model).toBe(seen.get('user-0'));
    expect((await detail(owner, 'support-bot')).variants.reduce((n, v) => n + v.requests, 0)).toBe(34);
  });

  it('moves an adaptive experiment toward the variant its feedback favours, keeps the history, and promotes one variant', async () => {
    expect((await http(owner, 'POST', '/api/feedback_metrics', { name: 'helpful', type: 'boolean', optimize: 'max' })).status).toBe(201);
    const made = await http(owner, 'POST', '/api/ai/experiments', {
      name: 'helper',
      variants: [
        { model: 'remote-echo', weight: 0.5 },
        { model: 'remote-quick', weight: 0.5 },
      ],
      metric: 'helpful',
      mode: 'adaptive',
      min_weight: 0.05,
    });
    expect(made.status).toBe(201);
    const answers: { id: string; model: string }[] = [];
    for (let i = 0; i < 30; i++) answers.push((await ask(owner, 'helper')).data);
    // With a metric, answers are kept without store: true, so feedback can name them.
    for (const a of answers) {
      const given = await client(owner).post('/feedback', { body: { target_id: a.id, metric: 'helpful', value: a.model === 'remote-quick' } });
      expect(given).toMatchObject({ object: 'feedback', target_id: a.id });
    }
    const d = await detail(owner, 'helper');
    const quick = variant(d, 'remote-quick');
    const echo = variant(d, 'remote-echo');
    expect(quick.metric).toMatchObject({ count: quick.requests, mean: 1 });
    expect(echo.metric).toMatchObject({ count: echo.requests, mean: 0 });
    expect(quick.metric!.ci95![1]).toBe(1);
    expect(echo.metric!.ci95![0]).toBe(0);
    expect(quick.weight).toBeGreaterThan(0.9);
    expect(echo.weight).toBeGreaterThanOrEqual(0.05);
    expect(d.history[0].type).toBe('created');
    expect(d.history.at(-1)).toMatchObject({ type: 'weights' });
    // The history keeps each move of 0.02 or more.
    expect(d.history.at(-1)!.variants.find((v) => v.model === 'remote-quick')!.weight).toBeGreaterThan(0.85);

    // store: false still wins over the experiment's default.
    const unkept = (await ask(owner, 'helper', { store: false })).data;
    expect((await openAiError(client(owner).chat.completions.retrieve(unkept.id))).status).toBe(404);

    const promoted = await http(owner, 'POST', '/api/ai/experiments/helper/promote', { model: 'remote-quick' });
    expect(promoted.status).toBe(200);
    expect(promoted.body).toMatchObject({ status: 'promoted', promoted_model: 'remote-quick' });
    for (let i = 0; i < 10; i++) expect((await ask(owner, 'helper')).response.headers.get('x-atelier-variant')).toBe('remote-quick');
    // Feedback after the promote no longer moves the weights.
    const late = (await ask(owner, 'helper')).data;
    await client(owner).post('/feedback', { body: { target_id: late.id, metric: 'helpful', value: false } });
    const after = await detail(owner, 'helper');
    expect(after.variants.map((v) => [v.model, v.weight])).toEqual([
      ['remote-echo', 0],
      ['remote-quick', 1],
    ]);
    expect(after.history.at(-1)).toMatchObject({ type: 'promoted', model: 'remote-quick' });
  });

  it('counts every judgement when feedback arrives at once: the weights left are those of all the feedback', async () => {
    const team = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
    expect((await http(team, 'POST', '/api/feedback_metrics', { name: 'score', type: 'float', optimize: 'max' })).status).toBe(201);
    const variants = [
      { model: 'remote-echo', weight: 0.5 },
      { model: 'remote-quick', weight: 0.5 },
    ];
    expect((await http(team, 'POST', '/api/ai/experiments', { name: 'busy', variants, metric: 'score', mode: 'adaptive', min_weight: 0.1 })).status).toBe(201);
    const answers = await Promise.all(Array.from({ length: 16 }, async () => (await ask(team, 'busy')).data));
    // Sixteen judgements at once, each making its gateway reweigh.
    await Promise.all(answers.map((a, i) => client(team).post('/feedback', { body: { target_id: a.id, metric: 'score', value: a.model === 'remote-quick' ? 4 + (i % 3) : 2 + (i % 2) } })));
    const d = await detail(team, 'busy');
    const tallies = d.variants.map((v) => {
      const values = answers.map((a, i) => ({ a, i })).filter(({ a }) => a.model === v.model).map(({ a, i }) => (a.model === 'remote-quick' ? 4 + (i % 3) : 2 + (i % 2)));
      expect(v.metric!.count).toBe(values.length);
      return { count: values.length, sum: values.reduce((x, y) => x + y, 0), sumSquares: values.reduce((x, y) => x + y * y, 0) };
    });
    expect(d.variants.map((v) => v.weight)).toEqual(adaptiveWeights(variants, tallies, 'float', 'max', 0.1).map((v) => v.weight));
  });

  it("keeps each namespace's experiments its own: another namespace cannot route to, read, promote, delete or take over one, and may use the same name", async () => {
    await http(owner, 'POST', '/api/ai/experiments', {
      name: 'private-split',
      variants: [
        { model: 'remote-echo', weight: 0.9 },
        { model: 'remote-quick', weight: 0.1 },
      ],
    });
    expect((await openAiError(ask(other, 'private-split'))).status).toBe(404);
    expect((await http(other, 'GET', '/api/ai/experiments/private-split')).status).toBe(404);
    expect((await http(other, 'GET', `/api/ai/experiments/private-split?namespace=${owner.namespace}`)).status).toBe(403);
    expect((await http(other, 'GET', '/api/ai/experiments')).body.data).toEqual([]);
    expect((await http(other, 'POST', '/api/ai/experiments/private-split/promote', { model: 'remote-quick' })).status).toBe(404);
    expect((await http(other, 'DELETE', '/api/ai/experiments/private-split')).status).toBe(404);
    expect((await http(other, 'POST', '/api/ai/experiments', { name: 'x', namespace: owner.namespace, variants: [{ model: 'remote-echo', weight: 1 }, { model: 'remote-quick', weight: 0 }] })).status).toBe(403);

    // The same name in the other namespace is that namespace's own experiment.
    const theirs = await http(other, 'POST', '/api/ai/experiments', {
      name: 'private-split',
      variants: [
        { model: 'remote-echo', weight: 0 },
        { model: 'remote-quick', weight: 1 },
      ],
    });
    expect(theirs.status).toBe(201);
    for (let i = 0; i < 4; i++) expect((await ask(other, 'private-split')).response.headers.get('x-atelier-variant')).toBe('remote-quick');
    expect((await detail(owner, 'private-split')).variants.map((v) => v.requests)).toEqual([0, 0]);
    expect((await detail(owner, 'private-split')).variants.map((v) => v.weight)).toEqual([0.9, 0.1]);

    // Deleting frees the name; the other namespace's experiment stays.
    expect((await http(owner, 'DELETE', '/api/ai/experiments/private-split')).body).toMatchObject({ object: 'experiment.deleted', deleted: true });
    expect((await openAiError(ask(owner, 'private-split'))).status).toBe(404);
    expect((await ask(other, 'private-split')).response.headers.get('x-atelier-variant')).toBe('remote-quick');
  });

  it('refuses bad experiments with 4xx naming the problem, and creates nothing', async () => {
    const two = (a: number, b: number) => [
      { model: 'remote-echo', weight: a },
      { model: 'remote-quick', weight: b },
    ];
    const cases: [Record<string, unknown>, number, string][] = [
      [{ name: 'bad-1', variants: two(0.5, 0.4) }, 400, 'the weights of variants must sum to 1'],
      [{ name: 'bad-2', variants: [{ model: 'remote-echo', weight: 1 }] }, 400, 'variants must name at least 2 models'],
      [{ name: 'bad-3', variants: [{ model: 'remote-echo', weight: 0.5 }, { model: 'remote-echo', weight: 0.5 }] }, 400, 'variants must name each model once'],
      [{ name: 'bad-4', variants: [{ model: 'remote-echo', weight: 0.5 }, { model: 'no-such-model', weight: 0.5 }] }, 400, "variants[1].model: 'no-such-model' is neither a chat model"],
      [{ name: 'bad-5', variants: [{ model: 'remote-echo', weight: 0.5 }, { model: 'local-embed', weight: 0.5 }] }, 400, "variants[1].model: 'local-embed' is neither a chat model"],
      [{ name: 'bad-6', variants: two(0.5, 0.5), metric: 'never-declared' }, 400, "no feedback metric 'never-declared'"],
      [{ name: 'bad-7', variants: two(0.5, 0.5), mode: 'adaptive' }, 400, 'mode "adaptive" needs a metric'],
      [{ name: 'bad-8', variants: two(0.5, 0.5), sticky_by: 'ip' }, 400, 'sticky_by must be "user" or "metadata.<key>"'],
      [{ name: 'Bad Name', variants: two(0.5, 0.5) }, 400, 'name must be 1 to 63 characters'],
      [{ name: 'bad-9', variants: two(0.5, 0.5), min_weight: 0.6 }, 400, 'min_weight must be from 0 to 0.5'],
      [{ name: 'bad-10', variants: two(0.5, 0.5), extra: 1 }, 400, 'extra'],
      [{ name: 'remote-echo', variants: two(0.5, 0.5) }, 409, "'remote-echo' is a model of the catalog"],
    ];
    for (const [body, status, text] of cases) {
      const res = await http(owner, 'POST', '/api/ai/experiments', body);
      expect([body.name, res.status]).toEqual([body.name, status]);
      expect((res.body as { error: { message: string } }).error.message).toContain(text);
    }
    const names = ((await http(owner, 'GET', '/api/ai/experiments')).body.data as { name: string }[]).map((e) => e.name);
    expect(names.some((n) => n.startsWith('bad') || n === 'Bad Name')).toBe(false);

    const ok = { name: 'taken', variants: two(0.5, 0.5) };
    expect((await http(owner, 'POST', '/api/ai/experiments', ok)).status).toBe(201);
    const again = await http(owner, 'POST', '/api/ai/experiments', ok);
    expect(again.status).toBe(409);
    expect((again.body as { error: { message: string } }).error.message).toContain("Experiment 'taken' already exists");
    const notVariant = await http(owner, 'POST', '/api/ai/experiments/taken/promote', { model: 'remote-echo-wide' });
    expect(notVariant.status).toBe(400);
    expect((notVariant.body as { error: { message: string } }).error.message).toContain("'remote-echo-wide' is not a variant of experiment taken");
    expect((await http(owner, 'GET', '/api/ai/experiments/no%00such')).status).toBe(404);
  });
});
