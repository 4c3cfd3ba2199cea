import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { Prisma } from '@atelier/db';
import { createTenant, waitFor, type Tenant, openAiError } from '@atelier/testing';
import { startChatStack, type ChatStack } from './chat.harness';

/**
 * Background responses (`background: true`) through the official SDK: queued at once, run on the
 * gateways' response-background queue, polled, streamed and resumed, cancelled.
 */
describe('background responses (POST /api/ai/responses with background: true)', () => {
  let stack: ChatStack;
  let owner: Tenant;
  let other: Tenant;
  const client = (t: Tenant) => stack.client(t.apiKey);
  const balance = async (t: Tenant) => (await stack.gw.http.request<{ credits: string; reserved: string }>('GET', '/api/credits', { token: t.apiKey })).body;
  const until = (t: Tenant, id: string, statuses: string[]) =>
    waitFor(
      async () => {
        const r = await client(t).responses.retrieve(id);
        return statuses.includes(r.status!) ? r : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 50, description: `response ${id} to be ${statuses.join('/')}` },
    );

  beforeAll(async () => {
    stack = await startChatStack();
    owner = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
    other = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('answers queued at once, runs off the request, and is polled to completed', async () => {
    const made = await client(owner).responses.create({ model: 'remote-delay', input: 'background work', background: true });
    expect(made).toMatchObject({ id: expect.stringMatching(/^resp_/), object: 'response', status: 'queued', background: true, store: true, output: [] });
    const seen = new Set<string>();
    const done = await waitFor(
      async () => {
        const r = await client(owner).responses.retrieve(made.id);
        seen.add(r.status!);
        return r.status === 'completed' ? r : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 20, description: 'completed' },
    );
    // The 300 ms upstream call is long enough to be seen running.
    expect(seen).toContain('in_progress');
    expect(done).toMatchObject({ status: 'completed', background: true, output_text: 'Echo: background work' });
    expect(done.usage!.output_tokens).toBeGreaterThan(0);
    // It is a stored response like any other: it continues a conversation.
    const next = await client(owner).responses.create({ model: 'remote-echo', input: 'and then?', previous_response_id: made.id });
    expect(next.output_text).toBe('Echo: and then?');
  });

  it('streams as it runs, keeps the events, and resumes a dropped stream after starting_after', async () => {
    const stream = await client(owner).responses.create({ model: 'remote-echo', input: 'stream me please', background: true, stream: true });
    const events: ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    expect(events[0]).toMatchObject({ type: 'response.queued', sequence_number: 0, response: { status: 'queued', background: true } });
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const last = events.at(-1)!;
    expect(last).toMatchObject({ type: 'response.completed', response: { status: 'completed', output_text: 'Echo: stream me please' } });
    const id = (events[0] as { response: { id: string } }).response.id;
    expect((await client(owner).responses.retrieve(id)).status).toBe('completed');

    // A client that lost the stream after event 3 gets the rest, and only the rest.
    const resumed: ResponseStreamEvent[] = [];
    for await (const event of await client(owner).responses.retrieve(id, { stream: true, starting_after: 3 })) resumed.push(event);
    expect(resumed).toEqual(events.slice(4));
    // Another namespace cannot read it, stream it or cancel it.
    expect(await openAiError(client(other).responses.retrieve(id))).toMatchObject({ status: 404 });
    expect(await openAiError(client(other).responses.retrieve(id, { stream: true, starting_after: 0 }) as Promise<unknown>)).toMatchObject({ status: 404 });
    expect(await openAiError(client(other).responses.cancel(id))).toMatchObject({ status: 404 });
  });

  it('cancels a running response: it ends cancelled, charged only for what ran', async () => {
    const before = await balance(owner);
    const stream = await client(owner).responses.create({ model: 'remote-slow', input: 'go on for a while', background: true, stream: true, max_output_tokens: 4000 });
    const events: ResponseStreamEvent[] = [];
    let id = '';
    for await (const event of stream) {
      events.push(event);
      if (event.type === 'response.queued') id = event.response.id;
      if (events.filter((e) => e.type === 'response.output_text.delta').length === 5) break;
    }
    const cancelled = await client(owner).responses.cancel(id);
    expect(cancelled).toMatchObject({ id, status: 'cancelled' });
    expect((await until(owner, id, ['cancelled'])).status).toBe('cancelled');
    // The stream ends too: a follower sees it end.
    const tail: ResponseStreamEvent[] = [];
    for await (const event of await client(owner).responses.retrieve(id, { stream: true, starting_after: 0 })) tail.push(event);
    expect(tail.at(-1)!.type).toBe('response.cancelled' as never);
    // Charged for the tokens delivered before the cancel, and nothing stays reserved.
    await waitFor(async () => (await balance(owner)).reserved === before.reserved, { timeoutMs: 10_000, description: 'the reservation closed' });
    const spent = new Prisma.Decimal(before.credits).minus((await balance(owner)).credits);
    expect(spent.gt(0)).toBe(true);
    // 4000 output tokens at 0.00003 would be 0.12: far less ran.
    expect(spent.lt('0.02')).toBe(true);
    // A second cancel answers as the first; an ended response cannot be cancelled; a foreground one is not cancellable.
    expect((await client(owner).responses.cancel(id)).status).toBe('cancelled');
    const finished = await client(owner).responses.create({ model: 'remote-echo', input: 'quick', background: true });
    await until(owner, finished.id, ['completed']);
    expect(await openAiError(client(owner).responses.cancel(finished.id))).toEqual({ status: 409, message: `Response ${finished.id} cannot be cancelled: it is completed` });
    const foreground = await client(owner).responses.create({ model: 'remote-echo', input: 'now' });
    expect(await openAiError(client(owner).responses.cancel(foreground.id))).toMatchObject({ status: 400, message: expect.stringContaining('Only background responses can be cancelled') });
  });

  it('stores a failed run as failed (even an upstream error Postgres cannot store as it is), and refuses a background response that would not be stored', async () => {
    expect(await openAiError(client(owner).responses.create({ model: 'remote-echo', input: 'x', background: true, store: false }))).toMatchObject({ status: 400, message: expect.stringContaining('background responses are stored') });
    const failed = await client(owner).responses.create({ model: 'remote-down-nul', input: 'this upstream fails', background: true });
    const ended = await until(owner, failed.id, ['failed']);
    expect(ended.error).toMatchObject({ message: expect.any(String) });
  });
});
