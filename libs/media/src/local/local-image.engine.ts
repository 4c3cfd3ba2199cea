import { sharp } from './libvips';
import type { EngineEnvironment, EngineRequest, EngineResult, MediaEngine } from '../engine';
import { sampledSteps, throwIfAborted } from '../engine-errors';
import { encodeImage, outputFormat, outputQuality } from './image-encoding';
import { imageSize } from './geometry';
import { sceneSvg } from './scene';
import { randomSeed } from '@atelier/random';

export const MAX_LOCAL_IMAGES = 4;

/** The sampling steps of a request (the local engines' progress is reported per step). */
export function inferenceSteps(params: Readonly<Record<string, unknown>>): number {
  return typeof params.num_inference_steps === 'number' ? params.num_inference_steps : 28;
}

/** Renders the seed for a request: the given one, or a fresh random one that is reported back. */
export function seedOf(params: Readonly<Record<string, unknown>>): number {
  return typeof params.seed === 'number' ? params.seed >>> 0 : randomSeed();
}

/**
 * Built-in text-to-image: a procedural scene from prompt and seed, rendered in-process.
 * With num_images > 1, image i uses seed + i (as diffusion pipelines do for batches).
 */
export class LocalImageEngine implements MediaEngine {
  constructor(private readonly env: EngineEnvironment) {}

  async run({ params, signal, onProgress, style }: EngineRequest): Promise<EngineResult> {
    const steps = inferenceSteps(params);
    // Sampling is 90 % of the run; encoding each output the rest.
    await sampledSteps(this.env.localLatencyMs, steps, signal, (done, n) => onProgress?.((0.9 * done) / n));
    const seed = seedOf(params);
    const { width, height } = imageSize(params);
    const count = Math.min(MAX_LOCAL_IMAGES, Math.max(1, typeof params.num_images === 'number' ? params.num_images : 1));
    const format = outputFormat(params);
    const quality = outputQuality(params);
    const outputs = [];
    for (let i = 0; i < count; i++) {
      throwIfAborted(signal);
      const svg = sceneSvg({
        prompt: String(params.prompt ?? ''),
        negativePrompt: typeof params.negative_prompt === 'string' ? params.negative_prompt : undefined,
        seed: (seed + i) >>> 0,
        width,
        height,
        steps,
        guidance: typeof params.guidance_scale === 'number' ? params.guidance_scale : typeof params.guidance === 'number' ? params.guidance : undefined,
        style,
      });
      outputs.push(await encodeImage(sharp(Buffer.from(svg)), format, quality));
      onProgress?.(0.9 + (0.1 * (i + 1)) / count);
    }
    return { outputs, seed };
  }
}
