import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { bundledFfmpegPath, probeMedia } from '@atelier/media';
import { SignedUrls } from '@atelier/storage';
import { createTenant, metricValue, uniqueName, waitFor, type Tenant } from '@atelier/testing';
import { startAssetServer, startMediaStack, type AssetServer, type MediaStack } from './media.harness';

interface ImageResult {
  model: string;
  created: number;
  images: { url?: string; b64_json?: string }[];
  seed?: number;
}
interface VideoResult {
  model: string;
  created: number;
  videos: { url?: string; b64_json?: string }[];
}
interface ErrorBody {
  error: { type: string; message: string };
}

describe('synchronous media endpoints', () => {
  let stack: MediaStack;
  let assets: AssetServer;
  let user: Tenant;
  let png: Buffer;

  beforeAll(async () => {
    png = await sharp({ create: { width: 200, height: 100, channels: 3, background: '#cc3322' } }).png().toBuffer();
    assets = await startAssetServer({
      '/photo.png': (_req, res) => res.writeHead(200, { 'content-type': 'image/png' }).end(png),
      '/forbidden.png': (_req, res) => res.writeHead(403).end('no'),
    });
    // Only the asset server's exact host:port is reachable; any other internal address is refused.
    stack = await startMediaStack({ MEDIA_FETCH_ALLOWED_HOSTS: `127.0.0.1:${assets.port}` });
    user = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
  });
  afterAll(async () => {
    await stack?.close();
    await assets?.close();
  });

  const post = <T = ImageResult>(path: string, body: unknown, token = user.apiKey) => stack.gw.http.request<T>('POST', path, { token, body });
  const credits = async (t: Tenant, namespace?: string) =>
    (await stack.gw.http.request<{ credits: string; reserved: string }>('GET', `/api/credits${namespace ? `?namespace=${namespace}` : ''}`, { token: t.apiKey })).body;
  /** The balance once every charge has landed: a charge is settled just after its answer is sent. */
  const settled = (t: Tenant, namespace?: string) =>
    waitFor(async () => {
      const balance = await credits(t, namespace);
      return balance.reserved === '0' ? balance : undefined;
    }, { description: 'the charge to be settled' });
  /** Fetches a result link through the gateway, as bytes. */
  const download = async (url: string) => {
    const res = await stack.gw.app.getHttpAdapter().getInstance().inject({ method: 'GET', url: stack.local(url) });
    return { status: res.statusCode, headers: res.headers, data: res.rawPayload };
  };

  describe('POST /api/ai/images/generate', () => {
    it('answers {model, created, images:[{url}]} with a temporary link to a real PNG of the requested aspect ratio', async () => {
      const before = Math.floor(Date.now() / 1000);
      const res = await post('/api/ai/images/generate', { model: 'local-image', prompt: 'a lighthouse on a cliff at sunset', aspect_ratio: '16:9' });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ model: 'local-image', created: expect.any(Number), images: [{ url: expect.any(String) }], seed: expect.any(Number) });
      expect(res.body.created).toBeGreaterThanOrEqual(before);
      const url = res.body.images[0].url!;
      // Stored under the billed namespace; the link is signed and expires after RESULT_URL_TTL_SECONDS.
      expect(url).toMatch(new RegExp(`^http://atelier\\.test/files/${user.namespace}/outputs/\\d{4}/\\d\\d/\\d\\d/[\\w-]+\\.png\\?expires=(\\d+)&signature=`));
      expect(Number(/expires=(\d+)/.exec(url)![1]) - before).toBeGreaterThanOrEqual(3600);
      expect(Number(/expires=(\d+)/.exec(url)![1]) - before).toBeLessThanOrEqual(3600 + 60);
      const file = await download(url);
      expect(file.status).toBe(200);
      expect(file.headers['content-type']).toBe('image/png');
      expect(file.headers['content-length']).toBe(String(file.data.length));
      const meta = await sharp(file.data).metadata();
      expect(meta.format).toBe('png');
      expect(meta.width! * 9).toBe(meta.height! * 16);
    });

    it('returns base64 bytes with response_format b64_json, reproducibly for a seed, in the requested format', async () => {
      const body = { model: 'local-image', prompt: 'a red fox in the snow', seed: 1234, response_format: 'b64_json', aspect_ratio: '3:4' };
      const a = await post('/api/ai/images/generate', body);
      const b = await post('/api/ai/images/generate', body);
      expect(a.status).toBe(200);
      expect(a.body.images[0]).toEqual({ b64_json: expect.any(String) });
      expect(a.body.seed).toBe(1234);
      const bytes = Buffer.from(a.body.images[0].b64_json!, 'base64');
      expect(bytes.equals(Buffer.from(b.body.images[0].b64_json!, 'base64'))).toBe(true);
      const meta = await sharp(bytes).metadata();
      expect(meta.width! * 4).toBe(meta.height! * 3);

      const jpg = await post('/api/ai/images/generate', { ...body, output_format: 'jpg' });
      expect(Buffer.from(jpg.body.images[0].b64_json!, 'base64').subarray(0, 3).toString('hex')).toBe('ffd8ff');
      const webp = await post('/api/ai/images/generate', { ...body, output_format: 'webp' });
      expect(Buffer.from(webp.body.images[0].b64_json!, 'base64').subarray(8, 12).toString('latin1')).toBe('WEBP');
    });

    it('makes num_images images and bills each one', async () => {
      const t = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
      const res = await post('/api/ai/images/generate', { model: 'local-image', prompt: 'tiles', num_images: 3, image_size: 'square' }, t.apiKey);
      expect(res.status).toBe(200);
      expect(res.body.images).toHaveLength(3);
      expect(await settled(t)).toMatchObject({ credits: '0.97', reserved: '0' });
    });

    it('answers the spec error texts', async () => {
      for (const prompt of [undefined, '', '   ']) {
        const res = await post<ErrorBody>('/api/ai/images/generate', { model: 'local-image', ...(prompt === undefined ? {} : { prompt }) });
        expect(res.status).toBe(400);
        expect(res.body.error.message).toBe('Prompt cannot be empty');
      }
      const unknown = await post<ErrorBody>('/api/ai/images/generate', { model: 'no-such-model', prompt: 'x' });
      expect(unknown.status).toBe(404);
      expect(unknown.body.error.message).toBe('Model not found: no-such-model');
      const noModel = await post<ErrorBody>('/api/ai/images/generate', { prompt: 'x' });
      expect(noModel.status).toBe(400);
      expect(noModel.body.error.message).toBe('You must specify a model to call');
    });

    it('refuses a model of another kind, naming the endpoint that serves it', async () => {
      const video = await post<ErrorBody>('/api/ai/images/generate', { model: 'local-video', prompt: 'x' });
      expect(video.status).toBe(400);
      expect(video.body.error.message).toContain('use POST /api/ai/videos/generate');
      const chat = await post<ErrorBody>('/api/ai/images/generate', { model: 'local-chat', prompt: 'x' });
      expect(chat.status).toBe(400);
      expect(chat.body.error.message).toContain('use POST /api/ai/chat/completions');
      const edit = await post<ErrorBody>('/api/ai/images/generate', { model: 'local-image-edit', prompt: 'x' });
      expect(edit.body.error.message).toContain('use POST /api/ai/images/edit');
    });

    it('rejects bad parameters with 400 naming the parameter and its allowed range or values', async () => {
      const steps = await post<ErrorBody>('/api/ai/images/generate', { model: 'local-image', prompt: 'x', num_inference_steps: 80 });
      expect(steps.status).toBe(400);
      expect(steps.body.error.message).toBe('num_inference_steps must be an integer between 1 and 50');
      const ratio = await post<ErrorBody>('/api/ai/images/generate', { model: 'local-image', prompt: 'x', aspect_ratio: '5:1' });
      expect(ratio.body.error.message).toMatch(/^aspect_ratio must be one of: 1:1, 16:9/);
      const extra = await post<ErrorBody>('/api/ai/images/generate', { model: 'local-image', prompt: 'x', colour: 'red' });
      expect(extra.body.error.message).toBe("unknown parameter 'colour'");
      const notObject = await stack.gw.http.request<ErrorBody>('POST', '/api/ai/images/generate', { token: user.apiKey, rawBody: '[1]', headers: { 'content-type': 'application/json' } });
      expect(notObject.status).toBe(400);
    });

    it('refuses without credits (402) and charges nothing', async () => {
      const poor = await createTenant(stack.gw.http, stack.gw.adminToken, '0.005');
      const res = await post<ErrorBody>('/api/ai/images/generate', { model: 'local-image', prompt: 'x' }, poor.apiKey);
      expect(res.status).toBe(402);
      expect(res.body.error).toMatchObject({ type: 'insufficient_credits', message: expect.stringMatching(/^Insufficient credits/) });
      expect(await settled(poor)).toMatchObject({ credits: '0.005', reserved: '0' });
    });

    it('bills and stores under target_namespace (an org the caller belongs to), and refuses foreign namespaces', async () => {
      const member = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
      const org = uniqueName('org');
      const created = await stack.gw.http.request('POST', '/api/admin/orgs', { token: stack.gw.adminToken, body: { name: org, members: [member.username], credits: 5 } });
      expect(created.status).toBe(201);
      const res = await post('/api/ai/images/generate', { model: 'local-image', prompt: 'team logo', target_namespace: org }, member.apiKey);
      expect(res.status).toBe(200);
      expect(res.body.images[0].url).toContain(`/files/${org}/outputs/`);
      expect(await settled(member, org)).toMatchObject({ credits: '4.99', reserved: '0' });
      expect(await credits(member)).toMatchObject({ credits: '1' });
      const foreign = await post<ErrorBody>('/api/ai/images/generate', { model: 'local-image', prompt: 'x', target_namespace: user.namespace }, member.apiKey);
      expect(foreign.status).toBe(403);
    });

    it('serves links only while they are valid: tampered or expired links get 403', async () => {
      const res = await post('/api/ai/images/generate', { model: 'local-image', prompt: 'expiring' });
      const url = res.body.images[0].url!;
      expect((await download(url)).status).toBe(200);
      const tampered = url.replace(/signature=([^&]+)/, (_m, s: string) => `signature=${s.slice(0, -2)}xx`);
      expect((await download(tampered)).status).toBe(403);
      const key = decodeURIComponent(new URL(url).pathname.replace(/^\/files\//, ''));
      const expired = stack.gw.app.get(SignedUrls).url(key, Date.now() - 2 * 3600 * 1000);
      const gone = await download(expired);
      expect(gone.status).toBe(403);
      expect(JSON.parse(gone.data.toString())).toMatchObject({ error: { message: expect.stringContaining('expired') } });
    });
  });

  describe('POST /api/ai/images/edit', () => {
    it('edits an image fetched by URL with real operations and bills it', async () => {
      const t = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
      const res = await post('/api/ai/images/edit', { model: 'local-image-edit', prompt: 'rotate 90 degrees', input_image: `${assets.base}/photo.png`, response_format: 'b64_json' }, t.apiKey);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ model: 'local-image-edit', images: [{ b64_json: expect.any(String) }] });
      expect(await sharp(Buffer.from(res.body.images[0].b64_json!, 'base64')).metadata()).toMatchObject({ format: 'png', width: 100, height: 200 });
      expect(await settled(t)).toMatchObject({ credits: '0.99', reserved: '0' });
    });

    it('takes an array of images (data URIs work too)', async () => {
      const uri = `data:image/png;base64,${png.toString('base64')}`;
      const res = await post('/api/ai/images/edit', { model: 'local-image-edit', prompt: 'side by side', input_image: [uri, `${assets.base}/photo.png`], match_input_image: false, output_format: 'jpg' });
      expect(res.status).toBe(200);
      const file = await download(res.body.images[0].url!);
      expect(file.headers['content-type']).toBe('image/jpeg');
      expect(await sharp(file.data).metadata()).toMatchObject({ width: 400, height: 100 });
    });

    it("answers an inaccessible input URL with the upstream's 403 text, and charges nothing", async () => {
      const t = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
      const url = `${assets.base}/forbidden.png`;
      const res = await post<ErrorBody>('/api/ai/images/edit', { model: 'local-image-edit', prompt: 'blur', input_image: url }, t.apiKey);
      expect(res.status).toBe(400);
      expect(res.body.error.message).toBe(`403 Client Error: Forbidden for url: ${url}`);
      expect(await settled(t)).toMatchObject({ credits: '1', reserved: '0' });
    });

    it('refuses to fetch loopback, private and metadata addresses (SSRF), after DNS resolution too', async () => {
      for (const url of [`http://localhost:${assets.port}/photo.png`, 'http://169.254.169.254/latest/meta-data/', 'http://10.0.0.1/a.png', `http://127.0.0.1:${assets.port + 1}/a.png`]) {
        const res = await post<ErrorBody>('/api/ai/images/edit', { model: 'local-image-edit', prompt: 'blur', input_image: url });
        expect(res.status).toBe(400);
        expect(res.body.error.message).toMatch(/^Refusing to fetch .* (loopback|linkLocal|private) address/);
      }
    });

    it('requires input_image as the model schema says', async () => {
      const res = await post<ErrorBody>('/api/ai/images/edit', { model: 'local-image-edit', prompt: 'blur' });
      expect(res.status).toBe(400);
      expect(res.body.error.message).toBe('input_image is required');
      const bad = await post<ErrorBody>('/api/ai/images/edit', { model: 'local-image-edit', prompt: 'blur', input_image: 'ftp://x/y.png' });
      expect(bad.body.error.message).toContain('input_image must be a public http(s) URL or a data URI');
    });
  });

  describe('POST /api/ai/videos/generate', () => {
    const probe = async (data: Buffer) => {
      const file = path.join(mkdtempSync(path.join(tmpdir(), 'atelier-video-')), 'v.mp4');
      writeFileSync(file, data);
      return probeMedia(bundledFfmpegPath(), file, 'mov', new AbortController().signal);
    };

    it('renders an MP4 with the defaults (5 s, 16:9) and bills per output second', async () => {
      const t = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
      const res = await post<VideoResult>('/api/ai/videos/generate', { model: 'local-video', prompt: 'waves rolling onto a beach', resolution: '480p', fps: 8 }, t.apiKey);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ model: 'local-video', created: expect.any(Number), videos: [{ url: expect.stringMatching(/\.mp4\?expires=/) }] });
      const file = await download(res.body.videos[0].url!);
      expect(file.headers['content-type']).toBe('video/mp4');
      expect(file.data.subarray(4, 8).toString('latin1')).toBe('ftyp');
      const info = await probe(file.data);
      expect(info).toMatchObject({ width: 854, height: 480 });
      expect(info.durationSeconds).toBeCloseTo(5, 0);
      expect(await settled(t)).toMatchObject({ credits: '0.9', reserved: '0' }); // 5 s x 0.02
    });

    it('renders multi_prompt shots as one video, base64 on request', async () => {
      const res = await post<VideoResult>('/api/ai/videos/generate', {
        model: 'local-video',
        multi_prompt: [{ prompt: 'a desert', duration: 1 }, { prompt: 'a city at night', duration: 1 }],
        resolution: '480p',
        aspect_ratio: '1:1',
        fps: 8,
        response_format: 'b64_json',
      });
      expect(res.status).toBe(200);
      const info = await probe(Buffer.from(res.body.videos[0].b64_json!, 'base64'));
      expect(info).toMatchObject({ width: 480, height: 480 });
      expect(info.durationSeconds).toBeCloseTo(2, 0);
    });

    it("reserves duration 'auto' at its maximum but charges only the seconds produced", async () => {
      const t = await createTenant(stack.gw.http, stack.gw.adminToken, '0.5');
      const res = await post<VideoResult>('/api/ai/videos/generate', { model: 'local-video', prompt: 'clouds', duration: 'auto', resolution: '480p', fps: 4 }, t.apiKey);
      expect(res.status).toBe(200);
      expect(await settled(t)).toMatchObject({ credits: '0.4', reserved: '0' }); // 5 s produced, 20 s reserved
      const poor = await createTenant(stack.gw.http, stack.gw.adminToken, '0.3');
      const refused = await post<ErrorBody>('/api/ai/videos/generate', { model: 'local-video', prompt: 'clouds', duration: 'auto' }, poor.apiKey);
      expect(refused.status).toBe(402);
    });

    it('answers prompt XOR multi_prompt violations with the spec 422 texts', async () => {
      const both = await post<ErrorBody>('/api/ai/videos/generate', { model: 'local-video', prompt: 'a', multi_prompt: [{ prompt: 'b', duration: 1 }] });
      expect(both.status).toBe(422);
      expect(both.body.error.message).toMatch(/422 - Value error, Cannot provide both 'prompt' and 'multi_prompt'\.$/);
      const neither = await post<ErrorBody>('/api/ai/videos/generate', { model: 'local-video', duration: 5 });
      expect(neither.status).toBe(422);
      expect(neither.body.error.message).toMatch(/422 - Value error, Either 'prompt' or 'multi_prompt' must be provided\.$/);
      const image = await post<ErrorBody>('/api/ai/videos/generate', { model: 'local-image', prompt: 'x' });
      expect(image.body.error.message).toContain('use POST /api/ai/images/generate');
    });

    // The request timeout only runs while a request arrives: security-process.spec.ts holds an
    // answer open past it.
    it('leaves the connection open for long renders: no socket inactivity timeout', () => {
      const server = stack.gw.app.getHttpServer() as http.Server;
      expect(server.timeout).toBe(0);
    });
  });

  describe('a client that goes away', () => {
    const ffmpegChildren = () => {
      return execFileSync('ps', ['-o', 'comm=', '--ppid', String(process.pid)], { encoding: 'utf8' })
        .split('\n')
        .filter((c) => c.includes('ffmpeg')).length;
    };

    it('cancels its video (ffmpeg killed, credits released) while images keep flowing on their own queue', async () => {
      const t = await createTenant(stack.gw.http, stack.gw.adminToken, '5');
      await stack.gw.app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = stack.gw.app.getHttpServer().address() as { port: number };
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/api/ai/videos/generate', headers: { authorization: `Bearer ${t.apiKey}`, 'content-type': 'application/json' } });
      req.on('error', () => undefined);
      req.end(JSON.stringify({ model: 'local-video', prompt: 'a very long storm', duration: 20, fps: 60, resolution: '1080p' }));

      await waitFor(() => ffmpegChildren() > 0, { timeoutMs: 20_000, description: 'the video encoder to start' });
      expect(await credits(t)).toMatchObject({ reserved: '0.4' });
      // The long video does not hold up an image request.
      const image = await post('/api/ai/images/generate', { model: 'local-image', prompt: 'quick one' }, t.apiKey);
      expect(image.status).toBe(200);
      expect(ffmpegChildren()).toBeGreaterThan(0);

      req.destroy();
      await waitFor(() => ffmpegChildren() === 0, { timeoutMs: 10_000, description: 'ffmpeg to be killed' });
      await waitFor(async () => (await credits(t)).reserved === '0', { description: 'the reservation to be released' });
      expect(await credits(t)).toMatchObject({ credits: '4.99' }); // only the image was charged
    });
  });

  describe('the render overlapping the credit reservation', () => {
    const metric = async (name: string, labels: Record<string, string> = {}) =>
      metricValue((await stack.gw.http.request('GET', '/metrics')).text, name, labels) || 0;
    const image = (t: Tenant) => post('/api/ai/images/generate', { model: 'local-image', prompt: 'a kite', width: 64, height: 64 }, t.apiKey);

    it('starts the render while the credits are being held once this gateway has seen ample credits, and bills it once', async () => {
      const t = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
      expect((await image(t)).status).toBe(200);
      const before = await metric('atelier_stage_duration_seconds_count', { stage: 'media.reserve_overlapped' });
      const res = await image(t);
      expect(res.status).toBe(200);
      expect((await download(res.body.images[0].url!)).status).toBe(200);
      expect(await metric('atelier_stage_duration_seconds_count', { stage: 'media.reserve_overlapped' })).toBe(before + 1);
      expect(await settled(t)).toMatchObject({ credits: '9.98', reserved: '0' });
    });

    it('answers 402 and charges nothing when the reservation refuses a request whose render already started', async () => {
      const t = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
      expect((await image(t)).status).toBe(200);
      const { credits: left } = await settled(t);
      const cut = await stack.gw.http.request('POST', `/api/admin/namespaces/${t.namespace}/credits`, { token: stack.gw.adminToken, body: { amount: (0.001 - Number(left)).toFixed(3) } });
      expect(cut.status).toBe(200);
      const refused = await metric('atelier_overlapped_refusals_total');
      const res = await image(t);
      expect(res.status).toBe(402);
      expect(res.body).toMatchObject({ error: { type: 'insufficient_credits' } });
      expect(await metric('atelier_overlapped_refusals_total')).toBe(refused + 1);
      expect(await settled(t)).toMatchObject({ credits: '0.001', reserved: '0' });
    });
  });
});
