import OpenAI, { BadRequestError, toFile } from 'openai';
import sharp from 'sharp';
import { createTenant, waitFor, type Tenant } from '@atelier/testing';
import { startMediaStack, type MediaStack } from './media.harness';

/** OpenAI's Images API on atelier's base URL, driven by the official SDK unchanged. */
describe('OpenAI Images API (client.images.generate / client.images.edit)', () => {
  let stack: MediaStack;
  let user: Tenant;
  let client: OpenAI;

  beforeAll(async () => {
    stack = await startMediaStack();
    await stack.gw.app.listen({ port: 0, host: '127.0.0.1' });
    user = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
    client = new OpenAI({ apiKey: user.apiKey, baseURL: `${await stack.gw.app.getUrl()}/api/ai`, maxRetries: 0 });
  });
  afterAll(() => stack?.close());

  const download = async (url: string) => {
    const res = await stack.gw.app.getHttpAdapter().getInstance().inject({ method: 'GET', url: stack.local(url) });
    return { status: res.statusCode, data: res.rawPayload };
  };
  /** The balance once every charge has landed: a charge is settled just after its answer is sent. */
  const credits = async () =>
    Number(
      await waitFor(async () => {
        const { body } = await stack.gw.http.request<{ credits: string; reserved: string }>('GET', '/api/credits', { token: user.apiKey });
        return body.reserved === '0' ? body.credits : undefined;
      }, { description: 'the charge to be settled' }),
    );

  it('generates through images.generate: a temporary link to a real image of the requested size', async () => {
    const res = await client.images.generate({ model: 'local-image', prompt: 'a lighthouse at dusk', size: '256x128' });
    expect(res.created).toEqual(expect.any(Number));
    expect(res.data).toHaveLength(1);
    const file = await download(res.data![0].url!);
    expect(file.status).toBe(200);
    expect(await sharp(file.data).metadata()).toMatchObject({ format: 'png', width: 256, height: 128 });
  });

  it('maps n and b64_json, and bills exactly as the contract route does for the same images', async () => {
    const before = await credits();
    const res = await client.images.generate({ model: 'local-image', prompt: 'two foxes', n: 2, size: '64x64', response_format: 'b64_json' });
    expect(res.data).toHaveLength(2);
    for (const image of res.data!) expect(await sharp(Buffer.from(image.b64_json!, 'base64')).metadata()).toMatchObject({ format: 'png', width: 64 });
    const viaSdk = before - (await credits());
    const contract = await stack.gw.http.request('POST', '/api/ai/images/generate', {
      token: user.apiKey,
      body: { model: 'local-image', prompt: 'two foxes', num_images: 2, width: 64, height: 64 },
    });
    expect(contract.status).toBe(200);
    const viaContract = before - viaSdk - (await credits());
    expect(viaSdk).toBeGreaterThan(0);
    expect(viaSdk).toBeCloseTo(viaContract, 6);
  });

  it('edits through images.edit: the uploaded file is the image that is edited', async () => {
    const input = await sharp({ create: { width: 120, height: 80, channels: 3, background: '#2255cc' } }).png().toBuffer();
    const res = await client.images.edit({ model: 'local-image-edit', image: await toFile(input, 'input.png', { type: 'image/png' }), prompt: 'make it warmer' });
    expect(res.data).toHaveLength(1);
    const file = await download(res.data![0].url!);
    expect(file.status).toBe(200);
    // local-image-edit keeps the input's proportions.
    const meta = await sharp(file.data).metadata();
    expect(meta.width! * 80).toBe(meta.height! * 120);
  });

  it('replays a keyed multipart edit: the SDK retrying with the same Idempotency-Key gets the first answer, charged once', async () => {
    const input = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#cc5522' } }).png().toBuffer();
    const other = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#22cc55' } }).png().toBuffer();
    const edit = async (image: Buffer, key: string) =>
      client.images
        // The SDK sets no idempotency header of its own for OpenAI: a client adds it.
        .edit({ model: 'local-image-edit', image: await toFile(image, 'input.png', { type: 'image/png' }), prompt: 'make it cooler' }, { headers: { 'Idempotency-Key': key } })
        .withResponse();
    const before = await credits();
    const first = await edit(input, 'edit-once');
    const charged = before - (await credits());
    expect(charged).toBeGreaterThan(0);
    // A new form (the SDK writes a new boundary each time), the same fields and bytes.
    const again = await edit(input, 'edit-once');
    expect(again.response.headers.get('idempotent-replayed')).toBe('true');
    expect(again.data).toEqual(first.data);
    expect(before - (await credits())).toBe(charged);
    // The same key with another image is refused.
    const reused = await edit(other, 'edit-once').catch((e: unknown) => e);
    expect((reused as { status?: number }).status).toBe(422);
    expect((reused as Error).message).toMatch(/already used with a different request body/);
  });

  it('answers bad input with the SDK-readable 400', async () => {
    const bad = await client.images.generate({ model: 'local-image', prompt: 'x', size: 'huge' as '1024x1024' }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(BadRequestError);
    expect((bad as BadRequestError).message).toMatch(/size must be "<width>x<height>"/);
    const missing = await client.images.generate({ model: 'local-image', prompt: '' }).catch((e: unknown) => e);
    expect((missing as BadRequestError).message).toMatch(/Prompt cannot be empty/);
    const input = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#000' } }).png().toBuffer();
    const masked = await client.images
      .edit({ model: 'local-image-edit', image: await toFile(input, 'a.png', { type: 'image/png' }), mask: await toFile(input, 'm.png', { type: 'image/png' }), prompt: 'x' })
      .catch((e: unknown) => e);
    expect((masked as BadRequestError).message).toMatch(/mask is not supported/);
  });
});
