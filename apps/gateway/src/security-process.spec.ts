import { spawnSync, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import {
  appProcessEnv,
  buildAppsForTest,
  rssOf,
  createTestEnvironment,
  freePort,
  startAppProcess,
  uniqueName,
  waitFor,
  type AppProcess,
  type TestEnvironment,
} from '@atelier/testing';


/** Closes when the server closes it (or after `ms`); whether the server did. */
function closedByServer(socket: net.Socket, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    if (socket.destroyed) return resolve(true);
    const timer = setTimeout(() => resolve(false), ms);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/**
 * The attacks that need the gateway as its own process: its memory is read from /proc while one
 * request streams hundreds of MB of image parts at it, and raw sockets trickle bytes at it as a
 * slowloris client does. Only the gateway runs: both are refused before any other service.
 */
describe('security: attacks on a gateway process', () => {
  let env: TestEnvironment;
  let build: ReturnType<typeof buildAppsForTest>;
  const spawned: ChildProcess[] = [];
  let gateway: AppProcess;
  let base: string;
  let apiKey: string;
  let metricsPort: number;

  beforeAll(async () => {
    env = await createTestEnvironment();
    build = buildAppsForTest(['gateway']);
    metricsPort = await freePort();
    gateway = await startAppProcess(
      build,
      env,
      'gateway',
      'PORT',
      { METRICS_PORT: String(metricsPort), HTTP_HEADERS_TIMEOUT_MS: '1500', HTTP_REQUEST_TIMEOUT_MS: '3000', HTTP_BODY_IDLE_TIMEOUT_MS: '1000', HTTP_MAX_INCOMPLETE_REQUESTS: '20', EVENTS_MAX_STREAMS_PER_KEY: '40' },
      (c) => spawned.push(c),
    );
    base = `http://127.0.0.1:${gateway.port}`;
    const created = await fetch(`${base}/api/admin/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${env.config.ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ username: uniqueName(), credits: '5' }),
    });
    apiKey = ((await created.json()) as { api_key: string }).api_key;
  }, 120_000);
  afterAll(async () => {
    for (const c of spawned) if (c.exitCode === null) c.kill('SIGKILL');
    build?.cleanup();
    await env?.cleanup();
  });

  it('refuses an edit of 12 parts of 30 MiB while it streams in, with the gateway growing by less than 100 MB', async () => {
    const pid = gateway.child.pid!;
    const before = rssOf(pid);
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, rssOf(pid))), 10);
    const boundary = '----atelier-attack';
    const part = 30 * 1024 * 1024;
    const chunk = Buffer.alloc(1024 * 1024, 0x41);
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(`${base}/api/ai/images/edits`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
      });
      let answered = false;
      req.on('response', (res) => {
        answered = true;
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => {
          req.destroy();
          resolve({ status: res.statusCode ?? 0, body });
        });
      });
      req.on('error', (err) => (answered ? undefined : reject(err)));
      // Written with backpressure and given up once answered: the client holds one chunk at a time.
      void (async () => {
        const write = (data: Buffer | string) => (req.write(data) ? Promise.resolve() : new Promise<void>((r) => req.once('drain', () => r())));
        await write(`--${boundary}\r\nContent-Disposition: form-data; name="prompt"\r\n\r\nblur\r\n`);
        for (let p = 0; p < 12 && !answered; p++) {
          await write(`--${boundary}\r\nContent-Disposition: form-data; name="image"; filename="${p}.png"\r\nContent-Type: image/png\r\n\r\n`);
          for (let sent = 0; sent < part && !answered; sent += chunk.length) await write(chunk);
          await write('\r\n');
        }
        if (!answered) req.end(`--${boundary}--\r\n`);
      })().catch(() => undefined);
    });
    clearInterval(sampler);
    expect(answer.status).toBe(413);
    expect(JSON.parse(answer.body)).toMatchObject({ error: { message: 'The images of an edit may total at most 33554432 bytes (EDIT_MAX_TOTAL_BYTES)' } });
    expect(peak - before).toBeLessThan(100 * 1024 * 1024);
    expect(gateway.alive()).toBe(true);
  });

  it('serves /metrics only on METRICS_PORT: the public port has none, so namespace labels stay in the cluster', async () => {
    const onPublic = await fetch(`${base}/metrics`);
    expect(onPublic.status).toBe(404);
    const scraped = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(scraped.status).toBe(200);
    expect(await scraped.text()).toContain('atelier_credits_reserved_total');
    expect((await fetch(`http://127.0.0.1:${metricsPort}/api/credits`)).status).toBe(404);
  });

  it('caps connections that have not sent a whole request, and times out ones that trickle their headers or body', async () => {
    const connect = () =>
      new Promise<net.Socket>((resolve, reject) => {
        const s = net.connect(gateway.port, '127.0.0.1', () => resolve(s));
        // Read whatever comes, or the server's close would wait behind unread bytes and never show.
        s.resume();
        s.on('error', () => undefined);
        s.once('error', reject);
      });
    // Twenty sockets trickling headers: each sends part of a request line and stops there.
    const trickling: net.Socket[] = [];
    for (let i = 0; i < 20; i++) {
      const s = await connect();
      s.write('POST /api/ai/chat/completions HTTP/1.1\r\nHost: x\r\n');
      trickling.push(s);
    }
    // The cap is full: a new connection is closed at once, before it is read.
    const extra = await connect();
    expect(await closedByServer(extra, 1000)).toBe(true);
    // HTTP_HEADERS_TIMEOUT_MS ends the trickling ones, and the server takes connections again.
    const ended = await Promise.all(trickling.map((s) => closedByServer(s, 6000)));
    expect(ended.every(Boolean)).toBe(true);
    await waitFor(async () => (await fetch(`${base}/health`).catch(() => undefined))?.status === 200, { timeoutMs: 5000, description: 'the gateway to answer again' });

    // A body trickled a byte at a time after complete headers ends at HTTP_REQUEST_TIMEOUT_MS, with a 408.
    const slow = await connect();
    let reply = '';
    slow.on('data', (d: Buffer) => (reply += d.toString()));
    slow.write(`POST /api/ai/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{`);
    const drip = setInterval(() => slow.writable && slow.write(' '), 200);
    const startedAt = Date.now();
    expect(await closedByServer(slow, 10_000)).toBe(true);
    clearInterval(drip);
    // Dripping every 200 ms, it outlived the 1 s body idle timeout: only the whole-request timeout ended it.
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(2500);
    expect(Date.now() - startedAt).toBeLessThan(8000);
    expect(reply).toMatch(/^HTTP\/1\.1 408 /);
    expect(reply).toContain('"request_timeout"');

    // A body that sends part and then nothing is cut off after HTTP_BODY_IDLE_TIMEOUT_MS, long before the request timeout.
    const stalled = await connect();
    let stalledReply = '';
    stalled.on('data', (d: Buffer) => (stalledReply += d.toString()));
    stalled.write(`POST /api/ai/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"model":`);
    const stalledAt = Date.now();
    expect(await closedByServer(stalled, 10_000)).toBe(true);
    expect(Date.now() - stalledAt).toBeLessThan(2500);
    expect(stalledReply).toMatch(/^HTTP\/1\.1 408 /);
    expect(stalledReply).toContain('The request body stopped arriving');
  });

  it('counts neither open event streams nor idle keep-alive connections against that cap: 30 of each, and a new request still gets through', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
    const streams: http.IncomingMessage[] = [];
    try {
      // An event stream is a GET whose request is complete and whose answer never ends.
      for (let i = 0; i < 30; i++)
        streams.push(
          await new Promise<http.IncomingMessage>((resolve, reject) =>
            http.get(`${base}/api/events`, { agent, headers: { authorization: `Bearer ${apiKey}` } }, resolve).on('error', reject),
          ),
        );
      expect(streams.map((s) => s.statusCode)).toEqual(Array(30).fill(200));
      // Thirty more connections, each answered once and then left idle, open.
      // An agent each, so each keeps its own connection open and idle.
      const idle = Array.from({ length: 30 }, () => new http.Agent({ keepAlive: true }));
      // One after another: 30 connections opened at once would each count until its request arrived.
      const answers: number[] = [];
      for (let i = 0; i < 30; i++)
        answers.push(
          await new Promise<number>((resolve, reject) =>
            http.get(`${base}/health`, { agent: idle[i] }, (res) => {
              res.resume();
              res.on('end', () => resolve(res.statusCode ?? 0));
            }).on('error', reject),
          ),
        );
      expect(answers).toEqual(Array(30).fill(200));
      // The cap is 20 incomplete requests; none of those 60 connections has one.
      const fresh = await fetch(`${base}/health`, { headers: { connection: 'close' } });
      expect(fresh.status).toBe(200);
      for (const a of idle) a.destroy();
    } finally {
      for (const s of streams) s.destroy();
      agent.destroy();
    }
  });

  it("the admin CLI's remove-member revokes the member's org keys, which the running gateway then refuses", async () => {
    const admin = { authorization: `Bearer ${env.config.ADMIN_TOKEN}`, 'content-type': 'application/json' };
    const username = uniqueName();
    const user = (await (await fetch(`${base}/api/admin/users`, { method: 'POST', headers: admin, body: JSON.stringify({ username }) })).json()) as { api_key: string };
    const org = uniqueName('org');
    expect((await fetch(`${base}/api/admin/orgs`, { method: 'POST', headers: admin, body: JSON.stringify({ name: org, members: [] }) })).status).toBe(201);
    const cli = (...args: string[]) => {
      const r = spawnSync(process.execPath, [path.join(path.dirname(build.main('gateway')), 'admin-cli.js'), ...args], { env: appProcessEnv(env), encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`admin ${args.join(' ')}: ${r.stderr}`);
      return JSON.parse(r.stdout) as Record<string, unknown>;
    };
    expect(cli('add-member', org, username)).toEqual({ org, username, member: true, revoked_keys: [] });
    const made = await fetch(`${base}/api/api_keys`, { method: 'POST', headers: { ...admin, authorization: `Bearer ${user.api_key}` }, body: JSON.stringify({ name: 'org', namespace: org }) });
    const orgKey = (await made.json()) as { api_key: string; prefix: string };
    expect(cli('remove-member', org, username)).toEqual({ org, username, member: false, revoked_keys: [orgKey.prefix] });
    await waitFor(async () => (await fetch(`${base}/api/credits`, { headers: { authorization: `Bearer ${orgKey.api_key}` } })).status === 401, {
      timeoutMs: 3000,
      description: 'the revoked org key to be refused',
    });
  });

  it('never cuts an answer that takes longer than HTTP_REQUEST_TIMEOUT_MS: the timeout ends with the request', async () => {
    const stream = new AbortController();
    const res = await fetch(`${base}/api/events`, { headers: { authorization: `Bearer ${apiKey}` }, signal: stream.signal });
    expect(res.status).toBe(200);
    let cut = false;
    const reading = (async () => {
      try {
        for await (const _ of res.body as AsyncIterable<Uint8Array>) void _;
        cut = true;
      } catch {
        // aborted by the test
      }
    })();
    await new Promise((r) => setTimeout(r, 4500));
    expect(cut).toBe(false);
    stream.abort();
    await reading;
  });
});
