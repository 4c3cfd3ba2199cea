import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PrismaService } from '@atelier/db';
import type { WebhookDeliveryView } from '@atelier/queue';
import { appProcessEnv, buildAppsForTest, createTenant, repoRoot, waitFor, type Tenant } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';

interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  answered: number;
}

/** A webhook receiver started by the test: records every request; `/flaky` fails its first call of each webhook-id. */
async function startReceiver(): Promise<{ url: string; port: number; received: Received[]; close(): Promise<void> }> {
  const received: Received[] = [];
  const seen = new Set<string>();
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const id = String(req.headers['webhook-id']);
      const status = req.url === '/flaky' && !seen.has(id) ? 500 : 200;
      seen.add(id);
      received.push({ path: req.url ?? '', headers: req.headers, body, answered: status });
      res.writeHead(status).end(status === 200 ? 'ok' : 'not now');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, port, received, close: () => new Promise((r) => server.close(() => r())) };
}

/** Standard Webhooks verification, written from the documented algorithm (not the server's code). */
function verifies(secret: string, r: Received): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${r.headers['webhook-id']}.${r.headers['webhook-timestamp']}.${r.body}`).digest('base64');
  return String(r.headers['webhook-signature']).split(' ').includes(`v1,${expected}`);
}


describe('webhooks of queued generations (gateway + a compiled queue-worker)', () => {
  let gw: GatewayHarness;
  let build: ReturnType<typeof buildAppsForTest>;
  let worker: ChildProcess;
  let allowed: Awaited<ReturnType<typeof startReceiver>>;
  let refused: Awaited<ReturnType<typeof startReceiver>>;
  let user: Tenant;

  beforeAll(async () => {
    build = buildAppsForTest(['queue-worker']);
    [allowed, refused] = await Promise.all([startReceiver(), startReceiver()]);
    gw = await startGateway({ STORAGE_DIR: mkdtempSync(path.join(tmpdir(), 'atelier-webhooks-')) });
    user = await createTenant(gw.http, gw.adminToken, '1');
    worker = spawn(process.execPath, [build.main('queue-worker')], {
      cwd: repoRoot,
      env: appProcessEnv(gw.env, {
        QUEUE_WORKER_PORT: '0',
        LOG_LEVEL: 'error',
        // Only the first receiver may be reached on loopback; the second is refused like any private address.
        MEDIA_FETCH_ALLOWED_HOSTS: `127.0.0.1:${allowed.port}`,
        WEBHOOK_RETRY_DELAYS_MS: '300,300',
      }),
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  });
  afterAll(async () => {
    worker?.kill('SIGKILL');
    await gw?.close();
    await Promise.all([allowed?.close(), refused?.close()]);
    build?.cleanup();
  });

  const enqueue = async (body: Record<string, unknown>, t = user) => gw.http.request<{ generations: { generation_id: string }[] }>('POST', '/api/ai/queue', { token: t.apiKey, body });
  const deliveries = async (id: string, t = user) => (await gw.http.request<{ deliveries: WebhookDeliveryView[] }>('GET', `/api/ai/queue/${id}/webhooks`, { token: t.apiKey })).body.deliveries;
  const secret = async (t = user) => (await gw.http.request<{ key: string }>('GET', '/api/webhooks/default/secret', { token: t.apiKey })).body.key;

  it.each([
    ['a relative URL', { webhook: '/hook' }, /webhook must be an absolute http\(s\) URL/],
    ['another scheme', { webhook: 'ftp://example.com/hook' }, /webhook must be an http\(s\) URL/],
    ['an unknown event', { webhook: 'https://example.com/hook', webhook_events_filter: ['started'] }, /webhook_events_filter must be a non-empty array of processing, completed/],
    ['a filter without a URL', { webhook_events_filter: ['completed'] }, /webhook_events_filter needs a webhook URL/],
  ])('refuses %s at enqueue with 400', async (_label, fields, message) => {
    const res = await enqueue({ model: 'local-image', prompt: 'hooked', ...fields });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: { type: 'invalid_request', message: expect.stringMatching(message) } });
  });

  it('gives each namespace a whsec_ secret on first read, to its members only, and rotates it', async () => {
    const first = await secret();
    expect(first).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(first.slice(6), 'base64')).toHaveLength(32);
    expect(await secret()).toBe(first);
    const stranger = await createTenant(gw.http, gw.adminToken, '1');
    const foreign = await gw.http.request('GET', `/api/webhooks/default/secret?namespace=${user.namespace}`, { token: stranger.apiKey });
    expect(foreign.status).toBe(403);
    const rotated = await gw.http.request<{ key: string }>('POST', '/api/webhooks/default/secret/rotate', { token: stranger.apiKey });
    expect(rotated.status).toBe(200);
    expect(rotated.body.key).toMatch(/^whsec_/);
    expect(rotated.body.key).not.toBe(await secret());
    expect(await secret(stranger)).toBe(rotated.body.key);
  });

  it('POSTs signed processing and completed messages, retries a failed delivery with the same webhook-id, and delivers completed exactly once', async () => {
    const key = await secret();
    const res = await enqueue({ model: 'local-image', prompt: 'tell me', webhook: `${allowed.url}/flaky`, webhook_events_filter: ['processing', 'completed'] });
    expect(res.status).toBe(200);
    const id = res.body.generations[0].generation_id;
    const record = (await gw.http.request<Record<string, unknown>>('GET', `/api/ai/queue/${id}`, { token: user.apiKey })).body;
    expect(record).toMatchObject({ webhook: `${allowed.url}/flaky`, webhook_events_filter: ['processing', 'completed'] });

    const mine = () => allowed.received.filter((r) => (JSON.parse(r.body) as { data: { generation_id: string } }).data.generation_id === id);
    await waitFor(() => mine().filter((r) => r.answered === 200).length === 2, { timeoutMs: 20_000, description: 'both messages to be accepted' });
    const calls = mine();
    for (const r of calls) {
      expect(verifies(key, r)).toBe(true);
      expect(r.headers['content-type']).toBe('application/json');
      expect(Math.abs(Number(r.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(60);
    }
    const bodies = calls.map((r) => JSON.parse(r.body) as { type: string; timestamp: string; data: Record<string, unknown> });
    const completed = calls.filter((_, i) => bodies[i].type === 'generation.completed');
    const processing = calls.filter((_, i) => bodies[i].type === 'generation.processing');
    // Each message failed once (500) and was retried with the same webhook-id: accepted once.
    expect(processing.map((r) => r.answered)).toEqual([500, 200]);
    expect(completed.map((r) => r.answered)).toEqual([500, 200]);
    expect(new Set(completed.map((r) => r.headers['webhook-id'])).size).toBe(1);
    expect(completed[0].headers['webhook-id']).not.toBe(processing[0].headers['webhook-id']);
    const done = bodies.find((b) => b.type === 'generation.completed')!;
    expect(Number.isNaN(Date.parse(done.timestamp))).toBe(false);
    expect(done.data).toMatchObject({ generation_id: id, status: 'succeeded', result_url: expect.any(String), cost: '0.01', webhook: `${allowed.url}/flaky` });
    expect(bodies.find((b) => b.type === 'generation.processing')!.data).toMatchObject({ generation_id: id, status: 'processing' });

    const listed = await waitFor(async () => ((d) => (d.length === 4 ? d : undefined))(await deliveries(id)), { description: 'four recorded attempts' });
    // Listed in the order they happened; per message, attempt 1 failed and attempt 2 was accepted.
    expect(listed.map((d) => Date.parse(d.at))).toEqual([...listed.map((d) => Date.parse(d.at))].sort((a, b) => a - b));
    const byMessage = [...listed].sort((a, b) => a.type.localeCompare(b.type) || a.attempt - b.attempt);
    expect(byMessage.map((d) => [d.type, d.attempt, d.status_code])).toEqual([
      ['generation.completed', 1, 500],
      ['generation.completed', 2, 200],
      ['generation.processing', 1, 500],
      ['generation.processing', 2, 200],
    ]);
    expect(byMessage[2]).toMatchObject({ webhook_id: processing[0].headers['webhook-id'], error: 'The receiver answered HTTP 500', at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
    // Nothing more arrives once delivered.
    await new Promise((r) => setTimeout(r, 1000));
    expect(mine()).toHaveLength(4);
  }, 40_000);

  describe("a cancel's completed webhook", () => {
    /** A generation the worker will take seconds over (a 20 s video), with a completed webhook to `path`. */
    const longVideo = async (t: Tenant, path: string) => {
      const res = await enqueue({ model: 'local-video', prompt: 'a long walk', duration: 20, webhook: `${allowed.url}${path}`, webhook_events_filter: ['completed'] }, t);
      expect(res.status).toBe(200);
      return res.body.generations[0].generation_id;
    };
    const completedFor = (path: string) =>
      allowed.received.filter((r) => r.path === path).map((r) => JSON.parse(r.body) as { type: string; data: { generation_id: string; status: string } });

    it('is sent once, saying cancelled', async () => {
      const t = await createTenant(gw.http, gw.adminToken, '10');
      const id = await longVideo(t, '/cancelled');
      expect((await gw.http.request('DELETE', `/api/ai/queue/${id}`, { token: t.apiKey })).status).toBe(200);
      await waitFor(() => completedFor('/cancelled').length === 1, { timeoutMs: 15_000, description: 'the cancelled message' });
      expect(completedFor('/cancelled')[0]).toMatchObject({ type: 'generation.completed', data: { generation_id: id, status: 'cancelled' } });
      await new Promise((r) => setTimeout(r, 1000));
      expect(completedFor('/cancelled')).toHaveLength(1);
    }, 30_000);

    it('is delivered by the outbox sweeper when the gateway died between the cancel and queuing it', async () => {
      const t = await createTenant(gw.http, gw.adminToken, '10');
      const id = await longVideo(t, '/cancel-crashed');
      // What the cancel commits, and all a gateway killed right after its commit leaves behind:
      // the cancelled row and its outbox row, the webhook never queued.
      await gw.app.get(PrismaService).$transaction([
        gw.app.get(PrismaService).$executeRaw`UPDATE generations SET status = 'cancelled', completed_at = now() WHERE id = ${id}::uuid AND status IN ('queued', 'processing')`,
        gw.app.get(PrismaService).$executeRaw`
          INSERT INTO generation_events (generation_id, user_id, payload, broadcast, created_at)
          SELECT id, owner_id, jsonb_build_object('generation_id', id, 'status', 'cancelled'), false, now() - interval '1 minute' FROM generations WHERE id = ${id}::uuid`,
      ]);
      // The queue-worker's sweeper runs every GENERATION_SWEEP_INTERVAL_MS (5 s).
      await waitFor(() => completedFor('/cancel-crashed').length === 1, { timeoutMs: 20_000, description: "the sweeper to queue the cancel's webhook" });
      expect(completedFor('/cancel-crashed')[0]).toMatchObject({ type: 'generation.completed', data: { generation_id: id, status: 'cancelled' } });
      const [row] = await gw.app.get(PrismaService).$queryRaw<{ published: boolean }[]>`SELECT published_at IS NOT NULL AS published FROM generation_events WHERE generation_id = ${id}::uuid`;
      expect(row.published).toBe(true);
    }, 40_000);
  });

  it('sends nothing to an address the policy refuses, and records why', async () => {
    const res = await enqueue({ model: 'local-image', prompt: 'not there', webhook: `${refused.url}/hook` });
    const id = res.body.generations[0].generation_id;
    const [attempt] = await waitFor(async () => ((d) => (d.length > 0 ? d : undefined))(await deliveries(id)), { timeoutMs: 20_000, description: 'the refused attempt' });
    expect(attempt).toMatchObject({ type: 'generation.completed', attempt: 1, status_code: null, error: expect.stringMatching(/^Refused: .*127\.0\.0\.1.*loopback/) });
    expect((await gw.http.request<{ status: string }>('GET', `/api/ai/queue/${id}`, { token: user.apiKey })).body.status).toBe('succeeded');
    await new Promise((r) => setTimeout(r, 800));
    expect(refused.received).toHaveLength(0);
    expect(await deliveries(id)).toHaveLength(1);
  }, 30_000);

  it("shows a generation's deliveries to its owner only", async () => {
    const res = await enqueue({ model: 'local-image', prompt: 'private', webhook: `${allowed.url}/ok` });
    const id = res.body.generations[0].generation_id;
    const stranger = await createTenant(gw.http, gw.adminToken, '1');
    expect((await gw.http.request('GET', `/api/ai/queue/${id}/webhooks`, { token: stranger.apiKey })).status).toBe(404);
  });
});
