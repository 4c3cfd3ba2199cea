import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CHAT_COMPLETION_QUEUE, GENERATION_COMPLETED_CHANNEL, IMAGE_GENERATION_QUEUE } from '@atelier/contracts';
import { PrismaService } from '@atelier/db';
import { BroadcastBus, hashSlot, RedisService } from '@atelier/runtime';
import { appProcessEnv, buildAppsForTest, createTenant, repoRoot, sseEvents, startThrowawayRedisCluster, waitFor, type Tenant, type ThrowawayRedisCluster } from '@atelier/testing';
import { startChatStack, type ChatStack } from './chat.harness';

/**
 * The whole stack on a three-primary Redis Cluster (REDIS_CLUSTER_NODES): chat over the RPC
 * streams, limits, the fair queue with a real queue-worker, events resumed with Last-Event-ID,
 * idempotency, and a primary killed and restarted from its append-only file mid-traffic.
 */
describe('on a Redis Cluster of three primaries', () => {
  let cluster: ThrowawayRedisCluster;
  let stack: ChatStack;
  let build: ReturnType<typeof buildAppsForTest>;
  const workers: ChildProcess[] = [];
  const ended = new Map<string, Set<string | undefined>>();

  const startWorker = () => {
    const child = spawn(process.execPath, [build.main('queue-worker')], {
      cwd: repoRoot,
      env: appProcessEnv(stack.gw.env, { REDIS_CLUSTER_NODES: cluster.nodes, QUEUE_WORKER_PORT: '0', QUEUE_WORKER_POOLS: 'image', JOB_LOCK_DURATION_MS: '3000', GENERATION_SWEEP_INTERVAL_MS: '500', LOG_LEVEL: 'error' }),
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    workers.push(child);
    return child;
  };
  const stopWorkers = async () => {
    const running = workers.splice(0).filter((w) => w.exitCode === null && w.signalCode === null);
    await Promise.all(running.map((w) => new Promise((r) => (w.once('exit', r), w.kill('SIGKILL')))));
  };
  const enqueue = async (t: Tenant, count: number) => {
    const ids: string[] = [];
    for (let left = count; left > 0; left -= 4) {
      const res = await stack.gw.http.request<{ generations: { generation_id: string }[] }>('POST', '/api/ai/queue', {
        token: t.apiKey,
        body: { model: 'local-image', prompt: 'a shard', width: 64, height: 64, num_generations: Math.min(4, left) },
      });
      if (res.status !== 200) throw new Error(`enqueue failed: ${res.status} ${res.text}`);
      ids.push(...res.body.generations.map((g) => g.generation_id));
    }
    return ids;
  };
  const statuses = async (ids: string[]) =>
    (await stack.gw.app.get(PrismaService).generation.findMany({ where: { id: { in: ids } }, select: { id: true, status: true, startedAt: true } })) as { id: string; status: string; startedAt: Date | null }[];
  const allSucceeded = (ids: string[]) =>
    waitFor(async () => (await statuses(ids)).filter((r) => r.status === 'succeeded').length === ids.length, { timeoutMs: 90_000, intervalMs: 250, description: `${ids.length} generations to succeed` });
  /** Each generation ended once (one completion event id) and was charged once. */
  const ranOnce = async (tenants: Tenant[], ids: string[]) => {
    await waitFor(() => ids.every((id) => ended.has(id)), { description: 'every completion event' });
    expect(ids.filter((id) => ended.get(id)!.size !== 1)).toEqual([]);
    const charged = await stack.gw.app.get(PrismaService).creditLedgerEntry.count({ where: { kind: 'charge', namespace: { name: { in: tenants.map((t) => t.namespace) } } } });
    expect(charged).toBe(ids.length);
  };
  const setLimits = (t: Tenant, limits: Record<string, number | null>) =>
    stack.gw.http.request('PUT', `/api/admin/namespaces/${t.namespace}/limits`, { token: stack.gw.adminToken, body: limits });
  const chat = (token: string, model = 'local-chat', headers: Record<string, string> = {}) =>
    fetch(`${stack.base}/api/ai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'the north wind and the sun' }], max_tokens: 8, seed: 3 }),
    });
  /** A tenant's retained events after `lastEventId`, read from the event stream until `count` arrived. */
  const replay = async (t: Tenant, lastEventId: string, count: number) => {
    const controller = new AbortController();
    const res = await fetch(`${stack.base}/api/events`, { headers: { authorization: `Bearer ${t.apiKey}`, 'last-event-id': lastEventId }, signal: controller.signal });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const deadline = setTimeout(() => controller.abort(), 5000);
    try {
      while (sseEvents(text).filter((e) => e.event === 'media_generation_completed').length < count) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
    } catch {
      // aborted at the deadline: the caller checks what arrived
    } finally {
      clearTimeout(deadline);
      controller.abort();
    }
    return sseEvents(text).filter((e) => e.event === 'media_generation_completed');
  };
  /** A live event stream of the tenant (no Last-Event-ID), read until closed. */
  const live = async (t: Tenant) => {
    const controller = new AbortController();
    const res = await fetch(`${stack.base}/api/events`, { headers: { authorization: `Bearer ${t.apiKey}` }, signal: controller.signal });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const reading = (async () => {
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          text += decoder.decode(value, { stream: true });
        }
      } catch {
        // closed
      }
    })();
    return {
      generations: () => sseEvents(text).filter((e) => e.event === 'media_generation_completed').map((e) => (JSON.parse(e.data) as { generation_id: string }).generation_id),
      close: async () => {
        controller.abort();
        await reading;
      },
    };
  };
  /** The suite's keys on one primary (SCAN there, as each primary holds only its own slots). */
  const keysOn = (port: number) =>
    execFileSync('redis-cli', ['-p', String(port), '--scan', '--pattern', `${stack.gw.env.prefix}:*`], { encoding: 'utf8' }).split('\n').filter(Boolean);

  beforeAll(async () => {
    build = buildAppsForTest(['queue-worker']);
    cluster = await startThrowawayRedisCluster(3);
    stack = await startChatStack({ REDIS_CLUSTER_NODES: cluster.nodes, STORAGE_DIR: mkdtempSync(path.join(tmpdir(), 'atelier-cluster-')) });
    await stack.gw.app.get(BroadcastBus).subscribe(GENERATION_COMPLETED_CHANNEL, (e) => ended.set(e.generation_id, (ended.get(e.generation_id) ?? new Set()).add(e.event_id)));
  }, 60_000);
  afterEach(() => stopWorkers());
  afterAll(async () => {
    await stack?.close();
    await cluster?.destroy();
    build?.cleanup();
  });

  it('connects every service to the cluster, not to REDIS_URL', () => {
    expect(stack.gw.app.get(RedisService).clustered).toBe(true);
  });

  it('answers chat completions, streamed and not, over the RPC streams of the cluster', async () => {
    const t = await createTenant(stack.gw.http, stack.gw.adminToken);
    const client = stack.client(t.apiKey);
    const answer = await client.chat.completions.create({ model: 'local-chat', messages: [{ role: 'user', content: 'a fox and some grapes' }], max_tokens: 12, seed: 1 });
    expect(answer.object).toBe('chat.completion');
    expect(answer.choices[0].message.content?.length).toBeGreaterThan(0);
    const stream = await client.chat.completions.create({ model: 'remote-echo', messages: [{ role: 'user', content: 'echo me' }], stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toContain('echo me');
  });

  it('holds rate limits across shards, giving back what a refused request took from the limits that admitted it', async () => {
    const t = await createTenant(stack.gw.http, stack.gw.adminToken);
    expect((await setLimits(t, { rpm: 4 })).status).toBe(200);
    const made = await stack.gw.http.request<{ api_key: string }>('POST', '/api/api_keys', { token: t.apiKey, body: { name: 'two a minute', limits: { rpm: 2 } } });
    expect(made.status).toBe(201);
    // The made key: its own limit of 2 binds (and it counts in the namespace's 4 and its maker's).
    expect([(await chat(made.body.api_key)).status, (await chat(made.body.api_key)).status]).toEqual([200, 200]);
    const third = await chat(made.body.api_key);
    expect(third.status).toBe(429);
    expect(((await third.json()) as { error: { message: string } }).error.message).toMatch(/for API key .+; retry after/);
    // That refusal was given back to the namespace: two of its four are left, not one.
    expect([(await chat(t.apiKey)).status, (await chat(t.apiKey)).status]).toEqual([200, 200]);
    const fifth = await chat(t.apiKey);
    expect(fifth.status).toBe(429);
    expect(((await fifth.json()) as { error: { message: string } }).error.message).toContain(`for namespace ${t.namespace}`);
  });

  it('holds max_concurrent across shards and frees the slot when the work ends', async () => {
    const t = await createTenant(stack.gw.http, stack.gw.adminToken);
    expect((await setLimits(t, { max_concurrent: 1 })).status).toBe(200);
    const [a, b] = await Promise.all([chat(t.apiKey, 'remote-delay'), chat(t.apiKey, 'remote-delay')]);
    expect([a.status, b.status].sort()).toEqual([200, 429]);
    // The slot is given back as the answer is settled, just after it is sent.
    await waitFor(async () => (await chat(t.apiKey, 'remote-delay')).status === 200, { timeoutMs: 3000, description: 'the slot to be free again' });
  });

  it('replays a request with the same Idempotency-Key, charged once', async () => {
    const t = await createTenant(stack.gw.http, stack.gw.adminToken);
    const first = await chat(t.apiKey, 'local-chat', { 'idempotency-key': 'cluster-1' });
    const again = await chat(t.apiKey, 'local-chat', { 'idempotency-key': 'cluster-1' });
    expect(first.status).toBe(200);
    expect(again.status).toBe(200);
    expect(((await again.json()) as { id: string }).id).toBe(((await first.json()) as { id: string }).id);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
  });

  it('places a newcomer ahead of a backlog in the fair queue, runs each generation once, and resumes its event stream with Last-Event-ID', async () => {
    const [a, b] = await Promise.all([createTenant(stack.gw.http, stack.gw.adminToken, '10'), createTenant(stack.gw.http, stack.gw.adminToken, '10')]);
    const aIds = await enqueue(a, 12);
    const [bId] = await enqueue(b, 1);
    // No worker yet: B's one generation waits behind at most one of A's, not twelve.
    const position = await stack.gw.http.request<{ queue_position: number }>('GET', `/api/ai/queue/${bId}`, { token: b.apiKey });
    expect(position.body.queue_position).toBeLessThanOrEqual(1);
    startWorker();
    await allSucceeded([...aIds, bId]);
    await ranOnce([a, b], [...aIds, bId]);
    const order = (await statuses([...aIds, bId])).sort((x, y) => x.startedAt!.getTime() - y.startedAt!.getTime());
    expect(order.findIndex((r) => r.id === bId)).toBeLessThanOrEqual(IMAGE_GENERATION_QUEUE.settings.concurrency + 1);

    // A's twelve completion events are retained on the cluster: a stream resuming after the fourth gets the other eight.
    const all = await replay(a, '0-0', 12);
    expect(all).toHaveLength(12);
    const rest = await replay(a, all[3].id!, 8);
    expect(rest.map((e) => e.id)).toEqual(all.slice(4).map((e) => e.id));
  }, 120_000);

  it('loses no generation when the primary holding the queue is killed and restarted from its append-only file mid-traffic', async () => {
    const t = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
    const prefix = stack.gw.app.get(RedisService).names.bullPrefix(IMAGE_GENERATION_QUEUE.name);
    const primary = await cluster.primaryOf(`${prefix}:${IMAGE_GENERATION_QUEUE.name}:wait`);
    const stream = await live(t);
    startWorker();
    const ids = await enqueue(t, 16);
    await waitFor(async () => (await statuses(ids)).filter((r) => r.status === 'succeeded').length >= 2, { description: 'the backlog to be under way' });
    await primary.kill();
    // While it is away an enqueue is either refused with a 503 or accepted (its job reaches the
    // queue once the shard is back, from the generation's row): never lost.
    const during = await stack.gw.http.request<{ generations: { generation_id: string }[] }>('POST', '/api/ai/queue', {
      token: t.apiKey,
      body: { model: 'local-image', prompt: 'during', width: 64, height: 64 },
    });
    expect([200, 503]).toContain(during.status);
    await primary.start();
    // Back in the cluster (its bus joined), as an operator's readiness check would wait for.
    await waitFor(() => execFileSync('redis-cli', ['-p', String(primary.port), 'cluster', 'info'], { encoding: 'utf8' }).includes('cluster_state:ok'), { description: 'the primary to rejoin' });
    const more = await enqueue(t, 4);
    const done = [...ids, ...more, ...(during.status === 200 ? [during.body.generations[0].generation_id] : [])];
    await allSucceeded(done);
    const charged = await stack.gw.app.get(PrismaService).creditLedgerEntry.count({ where: { kind: 'charge', namespace: { name: t.namespace } } });
    expect(charged).toBe(done.length);
    // Every generation's end is retained exactly once: a replay of everything has each once ...
    const retained = (await replay(t, '0-0', done.length)).map((e) => (JSON.parse(e.data) as { generation_id: string }).generation_id);
    expect(retained.sort()).toEqual([...done].sort());
    // ... and the live stream, opened before the failure, saw none twice. It can miss some published
    // around the restart (docs/operations.md, "Redis Cluster": a known gap), so how many it saw is not
    // asserted; those after the restart it must see.
    await waitFor(() => more.every((id) => stream.generations().includes(id)), { description: 'the completions after the restart on the live stream' });
    await stream.close();
    expect(stream.generations().filter((id, i, all) => all.indexOf(id) !== i)).toEqual([]);
    expect(stream.generations().every((id) => done.includes(id))).toBe(true);
  }, 150_000);

  it('spreads its keys over every primary, and the chat hand-off over one stream per primary', async () => {
    const counts = cluster.primaries.map((p) => keysOn(p.port).length);
    expect(counts.every((n) => n > 0)).toBe(true);
    const names = stack.gw.app.get(RedisService).names;
    expect(names.rpcShards).toBe(3);
    const streams = Array.from({ length: 3 }, (_, shard) => names.rpcStream(CHAT_COMPLETION_QUEUE.name, shard));
    // Our slot arithmetic is the cluster's own ...
    for (const key of [...streams, 'a', '{tag}x', 'chat-completion~7'])
      expect(hashSlot(key.includes('{') ? key.slice(key.indexOf('{') + 1, key.indexOf('}')) : key)).toBe(Number(execFileSync('redis-cli', ['-p', String(cluster.primaries[0].port), 'cluster', 'keyslot', key], { encoding: 'utf8' })));
    // ... each stream is on a primary of its own, and each carried calls.
    const holders = await Promise.all(streams.map((s) => cluster.primaryOf(s)));
    expect(new Set(holders.map((h) => h.port)).size).toBe(3);
    const added = streams.map((s, i) => {
      const info = execFileSync('redis-cli', ['-p', String(holders[i].port), 'xinfo', 'stream', s], { encoding: 'utf8' }).split('\n');
      return Number(info[info.indexOf('entries-added') + 1]);
    });
    expect(added.every((n) => n >= 2)).toBe(true);
  });
});
