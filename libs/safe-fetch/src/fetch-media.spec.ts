import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { blockedRange, fetchMedia, MediaFetchError } from './index';

const PNG = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A real HTTP server on 127.0.0.1 whose routes the tests define. */
async function startServer(routes: Record<string, Handler>): Promise<{ base: string; port: number; hits: string[]; close: () => Promise<void> }> {
  const hits: string[] = [];
  const server = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    const handler = routes[(req.url ?? '').split('?')[0]];
    if (!handler) {
      res.writeHead(404).end('nope');
      return;
    }
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    base: `http://127.0.0.1:${port}`,
    port,
    hits,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function failure(promise: Promise<unknown>): Promise<MediaFetchError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(MediaFetchError);
    return err as MediaFetchError;
  }
  throw new Error('expected the fetch to fail');
}

describe('fetchMedia', () => {
  let srv: Awaited<ReturnType<typeof startServer>>;
  let allowed: string[];

  beforeAll(async () => {
    srv = await startServer({
      '/cat.png': (_req, res) => res.writeHead(200, { 'content-type': 'image/png' }).end(PNG),
      '/octet': (_req, res) => res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(PNG),
      '/page.html': (_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html></html>'),
      '/forbidden': (_req, res) => res.writeHead(403).end('no'),
      '/broken': (_req, res) => res.writeHead(502).end('upstream'),
      '/big': (_req, res) => res.writeHead(200, { 'content-type': 'image/png', 'content-length': '5000000' }).end(),
      '/chunked-big': (_req, res) => {
        res.writeHead(200, { 'content-type': 'image/png' });
        res.write(Buffer.alloc(64 * 1024));
        res.end(Buffer.alloc(64 * 1024));
      },
      '/slow': () => undefined, // never answers
      '/redirect': (_req, res) => res.writeHead(302, { location: '/cat.png' }).end(),
      '/loop': (_req, res) => res.writeHead(302, { location: '/loop' }).end(),
    });
    allowed = ['127.0.0.1'];
  });
  afterAll(() => srv.close());

  it('downloads media from an allowed host with its content type', async () => {
    const media = await fetchMedia(`${srv.base}/cat.png`, { allowedHosts: allowed, accept: ['image/*'] });
    expect(media.data.equals(PNG)).toBe(true);
    expect(media.contentType).toBe('image/png');
    expect(media.url).toBe(`${srv.base}/cat.png`);
  });

  it('identifies generic application/octet-stream bodies by their bytes', async () => {
    const media = await fetchMedia(`${srv.base}/octet`, { allowedHosts: allowed, accept: ['image/png'] });
    expect(media.contentType).toBe('image/png');
  });

  it('answers a non-2xx status in the requests-style wording', async () => {
    const err = await failure(fetchMedia(`${srv.base}/forbidden`, { allowedHosts: allowed }));
    expect(err.message).toBe(`403 Client Error: Forbidden for url: ${srv.base}/forbidden`);
    expect(err.status).toBe(400);
    expect(err.httpStatus).toBe(403);
    expect((await failure(fetchMedia(`${srv.base}/missing`, { allowedHosts: allowed }))).message).toBe(
      `404 Client Error: Not Found for url: ${srv.base}/missing`,
    );
    expect((await failure(fetchMedia(`${srv.base}/broken`, { allowedHosts: allowed }))).message).toBe(
      `502 Server Error: Bad Gateway for url: ${srv.base}/broken`,
    );
  });

  it('refuses the wrong content type, naming what it got and what was expected', async () => {
    const err = await failure(fetchMedia(`${srv.base}/page.html`, { allowedHosts: allowed, accept: ['image/*'], label: 'input_image' }));
    expect(err.reason).toBe('content_type');
    expect(err.message).toMatch(/input_image .* is text\/html, expected image\/\*/);
  });

  it('enforces the size limit from Content-Length and while streaming', async () => {
    expect((await failure(fetchMedia(`${srv.base}/big`, { allowedHosts: allowed, maxBytes: 1000 }))).reason).toBe('too_large');
    const err = await failure(fetchMedia(`${srv.base}/chunked-big`, { allowedHosts: allowed, maxBytes: 100_000 }));
    expect(err.reason).toBe('too_large');
    expect(err.message).toContain('100000 bytes');
  });

  it('times out a server that never answers', async () => {
    const err = await failure(fetchMedia(`${srv.base}/slow`, { allowedHosts: allowed, timeoutMs: 200 }));
    expect(err.reason).toBe('timeout');
    expect(err.message).toContain('Timed out after 200 ms');
  });

  it('stops when the caller aborts', async () => {
    const controller = new AbortController();
    const pending = fetchMedia(`${srv.base}/slow`, { allowedHosts: allowed, signal: controller.signal });
    controller.abort();
    expect((await failure(pending)).reason).toBe('aborted');
  });

  it('follows redirects, with a bound', async () => {
    const media = await fetchMedia(`${srv.base}/redirect`, { allowedHosts: allowed });
    expect(media.url).toBe(`${srv.base}/cat.png`);
    expect((await failure(fetchMedia(`${srv.base}/loop`, { allowedHosts: allowed, maxRedirects: 3 }))).reason).toBe('too_many_redirects');
  });

  describe('SSRF guard', () => {
    it('refuses loopback, private, link-local and metadata addresses given literally', async () => {
      for (const url of [
        `${srv.base}/cat.png`,
        'http://10.0.0.8/x.png',
        'http://192.168.1.1/x.png',
        'http://172.16.0.1/x.png',
        'http://169.254.169.254/latest/meta-data/',
        'http://100.100.100.200/latest/meta-data/',
        'http://0.0.0.0/x.png',
        'http://[::1]/x.png',
        'http://[fd00:ec2::254]/x.png',
        'http://[::ffff:127.0.0.1]/x.png',
      ]) {
        const err = await failure(fetchMedia(url));
        expect(err.reason).toBe('blocked_address');
        expect(err.message).toMatch(/^Refusing to fetch .*publicly accessible/);
      }
      expect(srv.hits.filter((h) => h === '/cat.png').length).toBeLessThan(10);
    });

    it('refuses a host name that resolves to a non-public address (checked after DNS)', async () => {
      const before = srv.hits.length;
      const err = await failure(fetchMedia(`http://localhost:${srv.port}/cat.png`));
      expect(err.reason).toBe('blocked_address');
      expect(err.message).toMatch(/localhost resolves to (127\.0\.0\.1|::1), a loopback address/);
      expect(srv.hits.length).toBe(before);
    });

    it('checks every redirect hop: an allowed host cannot bounce the fetch inward', async () => {
      const bouncer = await startServer({
        '/to-internal': (_req, res) => res.writeHead(302, { location: `http://localhost:${srv.port}/cat.png` }).end(),
        '/to-metadata': (_req, res) => res.writeHead(307, { location: 'http://169.254.169.254/latest/meta-data/' }).end(),
      });
      try {
        const before = srv.hits.length;
        for (const path of ['/to-internal', '/to-metadata']) {
          const err = await failure(fetchMedia(`${bouncer.base}${path}`, { allowedHosts: ['127.0.0.1'] }));
          expect(err.reason).toBe('blocked_address');
        }
        expect(srv.hits.length).toBe(before);
      } finally {
        await bouncer.close();
      }
    });

    it('lets hosts listed in the allow-list through, by name or name:port', async () => {
      await expect(fetchMedia(`http://localhost:${srv.port}/cat.png`, { allowedHosts: ['localhost'] })).resolves.toMatchObject({
        contentType: 'image/png',
      });
      await expect(fetchMedia(`${srv.base}/cat.png`, { allowedHosts: [`127.0.0.1:${srv.port}`] })).resolves.toBeDefined();
      expect((await failure(fetchMedia(`${srv.base}/cat.png`, { allowedHosts: ['127.0.0.1:1'] }))).reason).toBe('blocked_address');
    });

    it('classifies addresses', () => {
      expect(blockedRange('8.8.8.8')).toBeUndefined();
      expect(blockedRange('2606:4700:4700::1111')).toBeUndefined();
      expect(blockedRange('127.0.0.1')).toBe('loopback');
      expect(blockedRange('169.254.169.254')).toBe('linkLocal');
      expect(blockedRange('10.1.2.3')).toBe('private');
      expect(blockedRange('::ffff:10.0.0.1')).toBe('private');
    });
  });

  describe('data URIs', () => {
    const uri = `data:image/png;base64,${PNG.toString('base64')}`;

    it('decodes base64 data URIs', async () => {
      const media = await fetchMedia(uri, { accept: ['image/*'] });
      expect(media.data.equals(PNG)).toBe(true);
      expect(media.contentType).toBe('image/png');
    });

    it('applies the size limit and the content-type check to data URIs', async () => {
      expect((await failure(fetchMedia(uri, { maxBytes: 10 }))).reason).toBe('too_large');
      expect((await failure(fetchMedia('data:text/plain,hello', { accept: ['image/*'] }))).reason).toBe('content_type');
      expect((await failure(fetchMedia('data:nonsense', {}))).reason).toBe('invalid_url');
    });
  });

  it('refuses other schemes and malformed URLs', async () => {
    expect((await failure(fetchMedia('file:///etc/passwd'))).message).toMatch(/must be an http\(s\) URL or a data URI/);
    expect((await failure(fetchMedia('ftp://example.com/x.png'))).reason).toBe('invalid_url');
    expect((await failure(fetchMedia('not a url'))).reason).toBe('invalid_url');
  });
});
