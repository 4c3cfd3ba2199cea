import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import sharp from 'sharp';
import { ModelCatalog, type MediaModelDefinition } from '@atelier/models';
import { waitFor } from '@atelier/testing';
import { EngineRegistry, GenerationCancelledError, parseEditPrompt, probeMedia } from './index';
import { testEngineEnvironment } from './engine-environment.harness';

const catalog = ModelCatalog.fromDirectory();
const model = (id: string) => catalog.get(id) as MediaModelDefinition;
const live = () => new AbortController().signal;

async function run(id: string, params: Record<string, unknown>, env = testEngineEnvironment(), signal = live()) {
  return new EngineRegistry(env).engineFor(model(id)).run({ model: model(id), params, signal });
}

/** A 200x100 PNG: red left half, blue right half. */
async function twoTone(): Promise<Buffer> {
  const half = (r: number, b: number) => sharp({ create: { width: 100, height: 100, channels: 3, background: { r, g: 0, b } } }).png().toBuffer();
  return sharp({ create: { width: 200, height: 100, channels: 3, background: '#000' } })
    .composite([
      { input: await half(255, 0), left: 0, top: 0 },
      { input: await half(0, 255), left: 100, top: 0 },
    ])
    .png()
    .toBuffer();
}

const dataUri = (png: Buffer) => `data:image/png;base64,${png.toString('base64')}`;

async function pixel(image: Buffer, x: number, y: number): Promise<number[]> {
  const { data, info } = await sharp(image).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  const i = (y * info.width + x) * info.channels;
  return [...data.subarray(i, i + 3)];
}

describe('local-image', () => {
  it('renders a PNG at 1024x1024 by default and honours aspect_ratio exactly', async () => {
    const square = await run('local-image', { prompt: 'a lighthouse at dusk', seed: 1 });
    expect(square.outputs[0]).toMatchObject({ contentType: 'image/png', extension: 'png', width: 1024, height: 1024 });
    expect((await sharp(square.outputs[0].data).metadata()).format).toBe('png');
    for (const [ratio, w, h] of [['16:9', 16, 9], ['9:16', 9, 16], ['4:3', 4, 3], ['3:4', 3, 4], ['21:9', 21, 9]] as const) {
      const { outputs } = await run('local-image', { prompt: 'a lighthouse', aspect_ratio: ratio, seed: 1, num_inference_steps: 4 });
      const meta = await sharp(outputs[0].data).metadata();
      expect(meta.width! * h).toBe(meta.height! * w);
      expect(meta.width! * meta.height!).toBeGreaterThan(900_000);
    }
  });

  it('honours image_size presets, width/height, output_format and output_quality', async () => {
    expect((await run('local-image', { prompt: 'x', image_size: 'portrait_16_9' })).outputs[0]).toMatchObject({ width: 576, height: 1024 });
    expect((await run('local-image', { prompt: 'x', width: 300, height: 200 })).outputs[0]).toMatchObject({ width: 300, height: 200 });
    const jpg = (await run('local-image', { prompt: 'x', output_format: 'jpg', seed: 3 })).outputs[0];
    expect(jpg.contentType).toBe('image/jpeg');
    expect((await sharp(jpg.data).metadata()).format).toBe('jpeg');
    const webp = (await run('local-image', { prompt: 'x', output_format: 'webp', seed: 3 })).outputs[0];
    expect((await sharp(webp.data).metadata()).format).toBe('webp');
    const low = (await run('local-image', { prompt: 'x', output_format: 'jpg', output_quality: 10, seed: 3 })).outputs[0];
    expect(low.data.length).toBeLessThan(jpg.data.length);
  });

  it('is byte-identical for the same prompt and seed, and differs for another seed or prompt', async () => {
    const params = { prompt: 'a red fox in a snowy forest at night', seed: 42 };
    const a = await run('local-image', params);
    const b = await run('local-image', params);
    expect(a.seed).toBe(42);
    expect(a.outputs[0].data.equals(b.outputs[0].data)).toBe(true);
    expect((await run('local-image', { ...params, seed: 43 })).outputs[0].data.equals(a.outputs[0].data)).toBe(false);
    expect((await run('local-image', { ...params, prompt: 'a blue whale' })).outputs[0].data.equals(a.outputs[0].data)).toBe(false);
  });

  it('picks and reports a random seed when none is given; the reported seed reproduces the image', async () => {
    const first = await run('local-image', { prompt: 'mountains' });
    expect(typeof first.seed).toBe('number');
    const again = await run('local-image', { prompt: 'mountains', seed: first.seed });
    expect(again.outputs[0].data.equals(first.outputs[0].data)).toBe(true);
  });

  it('draws more detail with more inference steps', async () => {
    const few = await run('local-image', { prompt: 'a forest by a lake at night', seed: 5, num_inference_steps: 1 });
    const many = await run('local-image', { prompt: 'a forest by a lake at night', seed: 5, num_inference_steps: 50 });
    // More shapes and finer ridges compress worse: a simple, robust proxy for detail.
    expect(many.outputs[0].data.length).toBeGreaterThan(few.outputs[0].data.length * 1.2);
  });

  it('leaves nothing in libvips\' operation cache after rendering (a process that renders holds no past images)', async () => {
    await run('local-image', { prompt: 'a harbour', seed: 3, num_images: 2, num_inference_steps: 4 });
    await run('local-image-edit', { prompt: 'rotate it', input_image: dataUri(await twoTone()) });
    expect(sharp.cache()).toMatchObject({ items: { current: 0, max: 0 }, memory: { current: 0, max: 0 } });
  });

  it('renders with one libvips thread per operation, also where MALLOC_ARENA_MAX is set (sharp then takes one per host core)', () => {
    const libvips = pathToFileURL(path.join(__dirname, 'local/libvips.ts')).href;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', `const { sharp } = await import(${JSON.stringify(libvips)}); console.log(String(sharp.concurrency()));`], {
      env: { ...process.env, MALLOC_ARENA_MAX: '2' },
      encoding: 'utf8',
    });
    expect(child.stdout.trim()).toBe('1');
  });

  it('waits LOCAL_ENGINE_LATENCY_MS, and a cancel ends the wait at once', async () => {
    const controller = new AbortController();
    const started = Date.now();
    const pending = run('local-image', { prompt: 'slow' }, testEngineEnvironment({ localLatencyMs: 60_000 }), controller.signal);
    controller.abort();
    await expect(pending).rejects.toBeInstanceOf(GenerationCancelledError);
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});

describe('local-image-edit', () => {
  let input: Buffer;
  beforeAll(async () => {
    input = await twoTone();
  });

  it('maps prompts to operations in order', () => {
    expect(parseEditPrompt('Rotate it by 45 degrees, then make it black and white').map((o) => o.kind)).toEqual(['rotate', 'grayscale']);
    expect(parseEditPrompt('flip vertically')).toEqual([{ kind: 'flip' }]);
    expect(parseEditPrompt('mirror the photo')).toEqual([{ kind: 'flop' }]);
    expect(parseEditPrompt('turn it blue')).toEqual([expect.objectContaining({ kind: 'tint', color: 'blue' })]);
    expect(parseEditPrompt('crop to 16:9')).toEqual([{ kind: 'crop', aspect: { w: 16, h: 9 } }]);
    expect(parseEditPrompt('a nice picture of a cat')).toEqual([]);
  });

  it('applies real operations: grayscale, rotate, mirror, invert, crop', async () => {
    const gray = (await run('local-image-edit', { prompt: 'make it grayscale', input_image: dataUri(input) })).outputs[0];
    const [r, g, b] = await pixel(gray.data, 10, 10);
    expect(r).toBe(g);
    expect(g).toBe(b);

    const rotated = (await run('local-image-edit', { prompt: 'rotate 90 degrees', input_image: dataUri(input) })).outputs[0];
    expect(await sharp(rotated.data).metadata()).toMatchObject({ width: 100, height: 200 });

    const mirrored = (await run('local-image-edit', { prompt: 'mirror it', input_image: dataUri(input) })).outputs[0];
    expect((await pixel(mirrored.data, 10, 50))[2]).toBeGreaterThan(200); // blue now on the left

    const inverted = (await run('local-image-edit', { prompt: 'invert the colors', input_image: dataUri(input) })).outputs[0];
    expect(await pixel(inverted.data, 10, 50)).toEqual([0, 255, 255]);

    const cropped = (await run('local-image-edit', { prompt: 'crop to square', input_image: dataUri(input) })).outputs[0];
    expect(await sharp(cropped.data).metadata()).toMatchObject({ width: 100, height: 100 });
  });

  it('re-encodes faithfully when the prompt names no operation, and logs that', async () => {
    const env = testEngineEnvironment();
    const out = (await run('local-image-edit', { prompt: 'something poetic', input_image: dataUri(input), output_format: 'png' }, env)).outputs[0];
    expect(await pixel(out.data, 10, 10)).toEqual([255, 0, 0]);
    expect(await pixel(out.data, 150, 10)).toEqual([0, 0, 255]);
    expect(env.logs.join('\n')).toMatch(/no edit operation recognised .*re-encoding/);
  });

  it('combines several input images, fitted to the first one unless match_input_image is off', async () => {
    const two = [dataUri(input), dataUri(input)];
    const matched = (await run('local-image-edit', { prompt: 'put them side by side', input_image: two, match_input_image: true })).outputs[0];
    expect(await sharp(matched.data).metadata()).toMatchObject({ width: 200, height: 100 });
    const free = (await run('local-image-edit', { prompt: 'put them side by side', input_image: two, match_input_image: false })).outputs[0];
    expect(await sharp(free.data).metadata()).toMatchObject({ width: 400, height: 100 });
    const square = (await run('local-image-edit', { prompt: 'blend them', input_image: two, match_input_image: false, aspect_ratio: '1:1' })).outputs[0];
    expect(await sharp(square.data).metadata()).toMatchObject({ width: 100, height: 100 });
  });

  it('writes the requested output format', async () => {
    const out = (await run('local-image-edit', { prompt: 'sepia', input_image: dataUri(input), output_format: 'webp' })).outputs[0];
    expect(out.contentType).toBe('image/webp');
    expect((await sharp(out.data).metadata()).format).toBe('webp');
  });

  it('reports an inaccessible input URL with the upstream status text', async () => {
    const server = http.createServer((_req, res) => res.writeHead(403).end());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/private.png`;
    try {
      await expect(run('local-image-edit', { prompt: 'blur', input_image: url })).rejects.toMatchObject({
        status: 400,
        message: `403 Client Error: Forbidden for url: ${url}`,
      });
    } finally {
      server.close();
    }
  });

  it('refuses input that is not an image', async () => {
    await expect(run('local-image-edit', { prompt: 'blur', input_image: 'data:image/png;base64,AAAA' })).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/^input_image could not be decoded as an image/),
    });
  });
});

describe('local-video', () => {
  const env = testEngineEnvironment();
  const probe = async (data: Buffer) => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'atelier-probe-')), 'v.mp4');
    writeFileSync(file, data);
    // Decoding the whole file proves it is valid; ffmpeg describes the streams on stderr.
    const decoded = spawnSync(env.ffmpegPath, ['-hide_banner', '-i', file, '-f', 'null', '-'], { encoding: 'utf8' });
    expect(decoded.status).toBe(0);
    const info = decoded.stderr;
    expect(info).toMatch(/Video: h264/);
    return { file, info, ...(await probeMedia(env.ffmpegPath, file, 'mov', live())) };
  };
  const frameAt = (file: string, where: 'first' | 'last') => {
    const args = where === 'first' ? ['-i', file, '-frames:v', '1'] : ['-i', file, '-vf', 'reverse', '-frames:v', '1'];
    return execFileSync(env.ffmpegPath, ['-hide_banner', '-loglevel', 'error', ...args, '-f', 'image2pipe', '-vcodec', 'png', '-'], { maxBuffer: 64 << 20 });
  };

  it('encodes a real H.264 MP4 with the requested size, fps and duration', async () => {
    const result = await run('local-video', { prompt: 'waves on a beach', duration: 2, fps: 12, resolution: '480p', aspect_ratio: '16:9', seed: 7 }, env);
    const out = result.outputs[0];
    expect(out).toMatchObject({ contentType: 'video/mp4', extension: 'mp4', width: 854, height: 480, durationSeconds: 2 });
    expect(out.data.subarray(4, 8).toString('latin1')).toBe('ftyp');
    const p = await probe(out.data);
    expect(p).toMatchObject({ width: 854, height: 480 });
    expect(p.durationSeconds).toBeCloseTo(2, 1);
    expect(p.info).not.toMatch(/Audio:/);
    expect((await run('local-video', { prompt: 'waves on a beach', duration: 2, fps: 12, resolution: '480p', aspect_ratio: '16:9', seed: 7 }, env)).outputs[0].data.equals(out.data)).toBe(true);
  });

  it('renders multi_prompt shots back to back, with an audio track on request', async () => {
    const result = await run(
      'local-video',
      { multi_prompt: [{ prompt: 'a desert at noon', duration: 1 }, { prompt: 'a city at night', duration: 2 }], fps: 10, resolution: '480p', aspect_ratio: '9:16', generate_audio: true },
      env,
    );
    expect(result.outputs[0]).toMatchObject({ width: 480, height: 854, durationSeconds: 3 });
    const p = await probe(result.outputs[0].data);
    expect(p.durationSeconds).toBeCloseTo(3, 0);
    expect(p.info).toMatch(/Audio: aac/);
  });

  it('uses num_frames and width/height when given', async () => {
    const result = await run('local-video', { prompt: 'x', num_frames: 7, fps: 7, width: 320, height: 240 }, env);
    expect(result.outputs[0]).toMatchObject({ width: 320, height: 240, durationSeconds: 1 });
  });

  it('starts on start_image_url and ends on tail_image_url; aspect_ratio auto follows the image', async () => {
    const red = await sharp({ create: { width: 300, height: 300, channels: 3, background: '#ff0000' } }).png().toBuffer();
    const blue = await sharp({ create: { width: 300, height: 300, channels: 3, background: '#0000ff' } }).png().toBuffer();
    const result = await run(
      'local-video',
      { prompt: 'a meadow', duration: 2, fps: 12, resolution: '480p', aspect_ratio: 'auto', start_image_url: dataUri(red), tail_image_url: dataUri(blue) },
      env,
    );
    expect(result.outputs[0]).toMatchObject({ width: 480, height: 480 });
    const { file } = await probe(result.outputs[0].data);
    const [fr, , fb] = await pixel(frameAt(file, 'first'), 240, 240);
    expect(fr).toBeGreaterThan(200);
    expect(fb).toBeLessThan(60);
    const [lr, , lb] = await pixel(frameAt(file, 'last'), 240, 240);
    expect(lb).toBeGreaterThan(200);
    expect(lr).toBeLessThan(60);
  });

  it('uses input_video as the moving background; duration and aspect_ratio auto follow it', async () => {
    const reference = await run('local-video', { prompt: 'reference', duration: 3, fps: 8, width: 320, height: 240 }, env);
    const result = await run(
      'local-video',
      { prompt: 'tinted', input_video: `data:video/mp4;base64,${reference.outputs[0].data.toString('base64')}`, duration: 'auto', aspect_ratio: 'auto', fps: 8, resolution: '480p' },
      env,
    );
    expect(result.outputs[0]).toMatchObject({ width: 640, height: 480, durationSeconds: 3 });
    const p = await probe(result.outputs[0].data);
    expect(p.durationSeconds).toBeCloseTo(3, 0);
  });

  it('refuses an input_video that is not a video', async () => {
    await expect(run('local-video', { prompt: 'x', input_video: 'data:video/mp4;base64,AAAAGGZ0eXBpc29tAAAAAA==' }, env)).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/^input_video could not be/),
    });
  });

  it('kills ffmpeg when cancelled', async () => {
    const controller = new AbortController();
    const children = () => execFileSync('ps', ['-o', 'comm=', '--ppid', String(process.pid)], { encoding: 'utf8' }).split('\n').filter((c) => c.includes('ffmpeg'));
    const pending = run('local-video', { prompt: 'a long storm', duration: 20, fps: 60, resolution: '1080p' }, env, controller.signal);
    pending.catch(() => undefined);
    await waitFor(() => children().length > 0, { timeoutMs: 20_000, description: 'ffmpeg to start' });
    controller.abort();
    await expect(pending).rejects.toBeInstanceOf(GenerationCancelledError);
    await waitFor(() => children().length === 0, { timeoutMs: 5_000, description: 'ffmpeg to be gone' });
  });
});
