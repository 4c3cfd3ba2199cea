import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { BlobStore, SignedUrls } from '@atelier/storage';
import { startGateway, type GatewayHarness } from './gateway.harness';

describe('temporary result links', () => {
  let gw: GatewayHarness;
  let blobs: BlobStore;
  let urls: SignedUrls;
  const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');

  beforeAll(async () => {
    gw = await startGateway({ STORAGE_DIR: mkdtempSync(path.join(tmpdir(), 'atelier-files-')), PUBLIC_URL: 'http://atelier.test' });
    blobs = gw.app.get(BlobStore);
    urls = gw.app.get(SignedUrls);
    await blobs.put('ns-a/outputs/x.png', png, 'image/png');
  });
  afterAll(() => gw?.close());

  const local = (url: string) => url.replace('http://atelier.test', '');

  it('serves a signed link with its content type and length, without an API key', async () => {
    const url = urls.url('ns-a/outputs/x.png');
    expect(url).toMatch(/^http:\/\/atelier\.test\/files\/ns-a\/outputs\/x\.png\?expires=\d+&signature=/);
    const res = await gw.http.request('GET', local(url));
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('image/png');
    expect(res.headers['content-length']).toBe(String(png.length));
  });

  it('refuses tampered and expired links with 403', async () => {
    const url = local(urls.url('ns-a/outputs/x.png'));
    const otherKey = url.replace('x.png', 'y.png');
    expect((await gw.http.request('GET', otherKey)).status).toBe(403);
    const longer = url.replace(/expires=(\d+)/, (_m, e: string) => `expires=${Number(e) + 1000}`);
    expect((await gw.http.request('GET', longer)).status).toBe(403);
    const expired = local(urls.url('ns-a/outputs/x.png', Date.now() - 2 * 3600 * 1000));
    const res = await gw.http.request('GET', expired);
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ error: { type: 'permission_denied', message: expect.stringMatching(/expired/) } });
    expect((await gw.http.request('GET', '/files/ns-a/outputs/x.png')).status).toBe(403);
  });

  it('rejects path tricks', async () => {
    const res = await gw.http.request('GET', '/files/..%2F..%2Fetc%2Fpasswd?expires=9999999999&signature=x');
    expect(res.status).toBe(403);
  });
});
