import { sharp, type Sharp } from './libvips';
import { MAX_INPUT_PIXELS } from './input-limits';
import { ApiError } from '@atelier/contracts';
import type { EngineEnvironment, EngineRequest, EngineResult, MediaEngine } from '../engine';
import { sampledSteps, throwIfAborted } from '../engine-errors';
import { combineMode, describeOperation, parseEditPrompt, type CombineMode, type EditOperation } from './edit-operations';
import { parseAspectRatio } from './geometry';
import { encodeImage, outputFormat, outputQuality } from './image-encoding';
import { inferenceSteps, seedOf } from './local-image.engine';

const MAX_SIDE = 4096;

interface Raster {
  data: Buffer;
  width: number;
  height: number;
  channels: 1 | 2 | 3 | 4;
}

async function toRaster(image: Sharp): Promise<Raster> {
  const { data, info } = await image.raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: info.channels };
}

const load = (r: Raster) => sharp(r.data, { raw: { width: r.width, height: r.height, channels: r.channels } });

/** Input images as decoded rasters; an undecodable input is the caller's problem (400), named by parameter. */
async function loadInputs(env: EngineEnvironment, input: unknown, signal: AbortSignal): Promise<Raster[]> {
  const urls = Array.isArray(input) ? input.map(String) : [String(input)];
  const fetched = await Promise.all(
    urls.map((url, i) => env.fetchInput(url, { accept: ['image/*'], label: Array.isArray(input) ? `input_image[${i}]` : 'input_image', signal })),
  );
  return Promise.all(
    fetched.map(async (media, i) => {
      try {
        // autoOrient: phone photos carry their rotation in EXIF; edits apply to what people see.
        return await toRaster(sharp(media.data, { limitInputPixels: MAX_INPUT_PIXELS }).autoOrient().toColourspace('srgb'));
      } catch (err) {
        const label = Array.isArray(input) ? `input_image[${i}]` : 'input_image';
        throw ApiError.badRequest(`${label} could not be decoded as an image (${media.contentType}): ${(err as Error).message}`);
      }
    }),
  );
}

async function coverTo(r: Raster, width: number, height: number): Promise<Raster> {
  if (r.width === width && r.height === height) return r;
  return toRaster(load(r).resize(width, height, { fit: 'cover', position: 'centre' }));
}

async function combine(inputs: Raster[], mode: CombineMode): Promise<Raster> {
  const [first] = inputs;
  if (inputs.length === 1) return first;
  const withAlpha = async (r: Raster, opacity = 1) => load(r).ensureAlpha(opacity).png({ compressionLevel: 0 }).toBuffer();
  if (mode === 'blend') {
    // Each later image over the accumulated one at 1/(n+1) opacity: an even mix of all inputs.
    let acc = first;
    for (let i = 1; i < inputs.length; i++) {
      const layer = await coverTo(inputs[i], first.width, first.height);
      const overlay = await withAlpha(layer, 1 / (i + 1));
      acc = await toRaster(load(acc).composite([{ input: overlay, blend: 'over' }]));
    }
    return acc;
  }
  const cellH = first.height;
  const cellW = first.width;
  const cells = await Promise.all(inputs.map((r) => coverTo(r, cellW, cellH)));
  const cols = mode === 'horizontal' ? cells.length : mode === 'vertical' ? 1 : 2;
  const rows = Math.ceil(cells.length / cols);
  const canvas = sharp({ create: { width: cellW * cols, height: cellH * rows, channels: 4, background: { r: 0, g: 0, b: 0, alpha: 1 } } });
  const composites = await Promise.all(
    cells.map(async (c, i) => ({ input: await withAlpha(c), left: (i % cols) * cellW, top: Math.floor(i / cols) * cellH })),
  );
  return toRaster(canvas.composite(composites));
}

async function apply(r: Raster, op: EditOperation): Promise<Raster> {
  const img = load(r);
  switch (op.kind) {
    case 'grayscale':
      return toRaster(img.grayscale().toColourspace('srgb'));
    case 'sepia':
      return toRaster(
        img.recomb([
          [0.393, 0.769, 0.189],
          [0.349, 0.686, 0.168],
          [0.272, 0.534, 0.131],
        ]),
      );
    case 'blur':
      return toRaster(img.blur(op.sigma));
    case 'sharpen':
      return toRaster(img.sharpen({ sigma: 1.5 }));
    case 'rotate':
      return toRaster(img.rotate(op.degrees, { background: { r: 0, g: 0, b: 0, alpha: 1 } }));
    case 'flip':
      return toRaster(img.flip());
    case 'flop':
      return toRaster(img.flop());
    case 'invert':
      return toRaster(img.negate({ alpha: false }));
    case 'brightness':
      return toRaster(img.modulate({ brightness: op.factor }));
    case 'saturation':
      return toRaster(img.modulate({ saturation: op.factor }));
    case 'contrast':
      return toRaster(img.linear(op.factor, 128 * (1 - op.factor)));
    case 'tint':
      return toRaster(img.tint({ r: op.rgb[0], g: op.rgb[1], b: op.rgb[2] }));
    case 'crop': {
      const target = op.aspect.w / op.aspect.h;
      const width = r.width / r.height > target ? Math.round(r.height * target) : r.width;
      const height = r.width / r.height > target ? r.height : Math.round(r.width / target);
      return coverTo(r, Math.max(1, width), Math.max(1, height));
    }
    case 'resize': {
      const clamp = (n: number) => Math.min(MAX_SIDE, Math.max(1, Math.round(n)));
      if (op.scale) return toRaster(img.resize(clamp(r.width * op.scale), clamp(r.height * op.scale), { fit: 'fill' }));
      const width = op.width ? clamp(op.width) : undefined;
      const height = op.height ? clamp(op.height) : undefined;
      return toRaster(img.resize(width, height, { fit: width && height ? 'fill' : 'inside' }));
    }
    case 'pixelate': {
      const block = Math.max(4, Math.round(Math.min(r.width, r.height) / 48));
      const small = await toRaster(img.resize(Math.max(1, Math.round(r.width / block)), Math.max(1, Math.round(r.height / block)), { kernel: 'nearest' }));
      return toRaster(load(small).resize(r.width, r.height, { kernel: 'nearest', fit: 'fill' }));
    }
    case 'edges':
      return toRaster(
        img
          .grayscale()
          .convolve({ width: 3, height: 3, kernel: [-1, -1, -1, -1, 8, -1, -1, -1, -1] })
          .negate({ alpha: false })
          .toColourspace('srgb'),
      );
  }
}

/**
 * Built-in image editing with real operations: the prompt is read for edits (grayscale, sepia,
 * blur, sharpen, rotate, flip, invert, brightness/contrast/saturation, tint, crop, resize,
 * pixelate, edges); several input images are combined first (blend, side by side, grid).
 */
export class LocalImageEditEngine implements MediaEngine {
  constructor(private readonly env: EngineEnvironment) {}

  async run({ model, params, signal, onProgress }: EngineRequest): Promise<EngineResult> {
    await sampledSteps(this.env.localLatencyMs, inferenceSteps(params), signal, (done, n) => onProgress?.((0.9 * done) / n));
    const seed = seedOf(params);
    const prompt = String(params.prompt ?? '');
    const inputs = await loadInputs(this.env, params.input_image, signal);
    throwIfAborted(signal);
    const first = inputs[0];
    let image = await combine(inputs, combineMode(prompt, inputs.length));
    const operations = parseEditPrompt(prompt);
    if (operations.length === 0)
      this.env.logger.log(`${model.id}: no edit operation recognised in the prompt ${JSON.stringify(prompt.slice(0, 200))}; re-encoding the input faithfully`);
    else this.env.logger.log(`${model.id}: applying ${operations.map(describeOperation).join(', ')}`);
    for (const op of operations) {
      throwIfAborted(signal);
      image = await apply(image, op);
    }
    const geometryChanged = operations.some((op) => op.kind === 'crop' || op.kind === 'resize' || (op.kind === 'rotate' && op.degrees % 180 !== 0));
    if (params.match_input_image !== false) {
      // A combination of several inputs is fitted back into the first image's frame.
      if (inputs.length > 1 && !geometryChanged)
        image = await toRaster(load(image).resize(first.width, first.height, { fit: 'contain', background: { r: 0, g: 0, b: 0, alpha: 1 } }));
    } else if (typeof params.aspect_ratio === 'string' && params.aspect_ratio !== 'auto') {
      image = await apply(image, { kind: 'crop', aspect: parseAspectRatio(params.aspect_ratio) });
    }
    throwIfAborted(signal);
    const output = await encodeImage(load(image), outputFormat(params), outputQuality(params));
    return { outputs: [output], seed };
  }
}
