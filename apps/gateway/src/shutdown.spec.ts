import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { IMAGE_GENERATION_QUEUE, IMAGE_RENDER_QUEUE } from '@atelier/contracts';
import { PrismaService } from '@atelier/db';
import { MediaServiceModule } from '@atelier/media';
import { createService, JobQueues, RedisService, rpcQueueDepth } from '@atelier/runtime';
import { appProcessEnv, buildAppsForTest, createTenant, metricValue, repoRoot, waitFor, type Tenant } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

interface Proc {
  child: ChildProcess;
  port: number;
  stdout: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * SIGTERM against real processes of the compiled apps (as Kubernetes stops a pod): workers finish
 * or hand back their jobs, the events app ends its streams cleanly, the gateway drains requests.
 */
describe('graceful shutdown on SIGTERM (real processes)', () => {
  let gw: GatewayHarness;
  let build: ReturnType<typeof buildAppsForTest>;
  let user: Tenant;
  const procs: ChildProcess[] = [];

  const start = async (app: 'queue-worker' | 'events' | 'gateway', portVar: string, extraEnv: Record<string, string> = {}): Promise<Proc> => {
    const port = await freePort();
    const child = spawn(process.execPath, [build.main(app)], {
      cwd: repoRoot,
      env: appProcessEnv(gw.env, {
        ADMIN_TOKEN: gw.adminToken,
        HOST: '127.0.0.1',
        [portVar]: String(port),
        LOG_LEVEL: 'info',
        PRETTY_LOGS: 'false',
        ...extraEnv,
      }),
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    procs.push(child);
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`${app} exited early:\n${out}`);
        return (await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined))?.ok;
      },
      { timeoutMs: 20_000, description: `${app} to be healthy` },
    );
    return { child, port, stdout: () => out, exited };
  };
  const logLines = (text: string) =>
    text
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  const enqueue = async (prompt: string, requestId?: string) => {
    const res = await gw.http.request<{ generations: { generation_id: string }[] }>('POST', '/api/ai/queue', {
      token: user.apiKey,
      body: { model: 'local-image', prompt },
      headers: requestId ? { 'x-request-id': requestId } : {},
    });
    if (res.status !== 200) throw new Error(`enqueue failed: ${res.status} ${res.text}`);
    return res.body.generations[0].generation_id;
  };
  const status = async (id: string) => (await gw.http.request<{ status: string }>('GET', `/api/ai/queue/${id}`, { token: user.apiKey })).body.status;

  beforeAll(async () => {
    build = buildAppsForTest(['queue-worker', 'events', 'gateway']);
    gw = await startGateway({ STORAGE_DIR: mkdtempSync(path.join(tmpdir(), 'atelier-shutdown-')) });
    user = await createTenant(gw.http, gw.adminToken, '10');
  }, 120_000);
  afterAll(async () => {
    for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
    await gw?.close();
    build?.cleanup();
  });

  it('a queue worker finishes its active job, logs it under the request id, and exits 0', async () => {
    const worker = await start('queue-worker', 'QUEUE_WORKER_PORT', { LOCAL_ENGINE_LATENCY_MS: '1500' });
    // A first generation, to read the worker's own metrics while it runs.
    const first = await enqueue('warm-up');
    await waitFor(async () => (await status(first)) === 'succeeded', { timeoutMs: 20_000, description: 'the first generation' });
    // The job ends (and is timed) just after the generation's state commits.
    const scraped = await waitFor(
      async () => {
        const text = await (await fetch(`http://127.0.0.1:${worker.port}/metrics`)).text();
        return metricValue(text, 'atelier_job_duration_seconds_count', { queue: 'generation-image', outcome: 'completed' }) === 1 ? text : undefined;
      },
      { description: 'the job to be timed' },
    );
    expect(metricValue(scraped, 'atelier_generations_total', { model: 'local-image', outcome: 'succeeded', mode: 'queue', service: 'queue-worker' })).toBe(1);
    expect(metricValue(scraped, 'atelier_credits_settled_total')).toBeCloseTo(0.01, 6);
    expect(metricValue(scraped, 'atelier_queue_jobs', { queue: 'generation-image', state: 'active' })).toBe(0);

    const id = await enqueue('finish me during shutdown', 'trace-sigterm-1');
    await waitFor(async () => (await status(id)) === 'processing', { timeoutMs: 20_000, description: 'the worker to start it' });
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toEqual({ code: 0, signal: null });
    // Finished during the drain, not abandoned: succeeded, charged once, its event published.
    expect(await status(id)).toBe('succeeded');
    expect(await gw.app.get(PrismaService).generationEvent.count({ where: { generationId: id } })).toBe(1);
    // JSON lines; the worker's lines for the job carry the request id the gateway was given.
    const lines = logLines(worker.stdout());
    expect(lines.find((l) => l.requestId === 'trace-sigterm-1' && l.queue === 'generation-image' && /^job completed/.test(String(l.msg)))).toMatchObject({
      level: 'info',
      service: 'queue-worker',
      jobId: id,
    });
    expect(lines.some((l) => /SIGTERM: draining/.test(String(l.msg)))).toBe(true);
  }, 60_000);

  it('a queue worker past its shutdown timeout hands the job back; another worker completes it once', async () => {
    const slow = await start('queue-worker', 'QUEUE_WORKER_PORT', { LOCAL_ENGINE_LATENCY_MS: '120000', SHUTDOWN_TIMEOUT_MS: '1000', JOB_LOCK_DURATION_MS: '1500' });
    const id = await enqueue('hand me back');
    await waitFor(async () => (await status(id)) === 'processing', { timeoutMs: 20_000, description: 'the slow worker to start it' });
    slow.child.kill('SIGTERM');
    expect(await slow.exited).toEqual({ code: 0, signal: null });
    const queue = gw.app.get(JobQueues).queue(IMAGE_GENERATION_QUEUE);
    // Handed back, not lost with the process and not counted as a failed attempt: waiting for the
    // next worker in its place in the fair order (BullMQ's prioritized state).
    expect(await queue.getJobState(id)).toBe('prioritized');
    expect((await queue.getJob(id))?.attemptsMade).toBe(0);
    await start('queue-worker', 'QUEUE_WORKER_PORT', { JOB_LOCK_DURATION_MS: '1500' });
    await waitFor(async () => (await status(id)) === 'succeeded', { timeoutMs: 30_000, description: 'the next worker to complete it' });
    const prisma = gw.app.get(PrismaService);
    const reservation = await prisma.creditReservation.findFirstOrThrow({ where: { reference: `generation:${id}` } });
    expect(await prisma.creditLedgerEntry.count({ where: { kind: 'charge', reservationId: reservation.id } })).toBe(1);
  }, 60_000);

  it('the events app ends open streams cleanly and exits 0', async () => {
    const events = await start('events', 'EVENTS_PORT');
    const req = http.get(`http://127.0.0.1:${events.port}/api/events`, { headers: { authorization: `Bearer ${user.apiKey}` } });
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => req.on('response', resolve).on('error', reject));
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    let body = '';
    res.on('data', (d: Buffer) => (body += d.toString()));
    const ended = new Promise<'end' | 'aborted'>((resolve) => {
      res.on('end', () => resolve('end'));
      res.on('aborted', () => resolve('aborted'));
      res.on('error', () => resolve('aborted'));
    });
    events.child.kill('SIGTERM');
    // A complete response (terminating chunk), not a reset, and a hint to reconnect elsewhere.
    expect(await ended).toBe('end');
    expect(body).toContain('retry: 1000');
    expect(await events.exited).toEqual({ code: 0, signal: null });
  }, 30_000);

  it('the gateway answers the request in flight, closes idle keep-alive connections, and exits 0', async () => {
    const media: NestFastifyApplication = await createService(
      MediaServiceModule.forRoot({ ...gw.env.config, LOCAL_ENGINE_LATENCY_MS: 1500 }),
      { ...gw.env.config, LOCAL_ENGINE_LATENCY_MS: 1500 },
      { service: 'media' },
    );
    try {
      const gateway = await start('gateway', 'PORT');
      const agent = new http.Agent({ keepAlive: true, maxSockets: 2 });
      // An idle keep-alive connection, left open after its request.
      const idleClosed = new Promise<void>((resolve, reject) => {
        const warm = http.get(`http://127.0.0.1:${gateway.port}/health`, { agent }, (r) => {
          r.resume();
          r.on('end', () => setImmediate(() => warm.socket?.once('close', () => resolve())));
        });
        warm.on('error', reject);
      });
      const inFlight = new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = http.request(
          `http://127.0.0.1:${gateway.port}/api/ai/images/generate`,
          { method: 'POST', headers: { authorization: `Bearer ${user.apiKey}`, 'content-type': 'application/json' } },
          (r) => {
            let body = '';
            r.on('data', (d: Buffer) => (body += d.toString()));
            r.on('end', () => resolve({ status: r.statusCode ?? 0, body }));
          },
        );
        req.on('error', reject);
        req.end(JSON.stringify({ model: 'local-image', prompt: 'drain me', response_format: 'b64_json' }));
      });
      const redis = gw.app.get(RedisService);
      await waitFor(async () => (await rpcQueueDepth(redis.client, redis.names.rpcStream(IMAGE_RENDER_QUEUE.name))).active === 1, {
        timeoutMs: 20_000,
        description: 'the render to start',
      });
      gateway.child.kill('SIGTERM');
      await idleClosed;
      const answer = await inFlight;
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.body).images[0].b64_json).toMatch(/^iVBORw0KGgo/);
      expect(await gateway.exited).toEqual({ code: 0, signal: null });
      agent.destroy();
    } finally {
      await media.close();
    }
  }, 60_000);
});
