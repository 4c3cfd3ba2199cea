import type { JsonSchema, MediaModelDefinition } from '@atelier/models';
import { DEFAULT_VIDEO_SECONDS, MAX_AUTO_SECONDS } from './local/local-video.engine';

/** What a media request is billed for. */
export interface MediaUsage {
  images: number;
  videoSeconds: number;
}

const MICRO = 1_000_000n;

function toMicro(decimal: string): bigint {
  const m = /^(\d+)(?:\.(\d{1,6}))?$/.exec(decimal);
  if (!m) throw new Error(`price ${decimal} is not a decimal with at most 6 places`);
  return BigInt(m[1]) * MICRO + BigInt((m[2] ?? '').padEnd(6, '0'));
}

function fromMicro(micro: bigint): string {
  const whole = micro / MICRO;
  const frac = (micro % MICRO).toString().padStart(6, '0').replace(/0+$/, '');
  return frac ? `${whole}.${frac}` : whole.toString();
}

/** price x quantity, exactly (no float ever touches money), rounded up to the micro-credit. */
export function multiplyPrice(price: string, quantity: number): string {
  const q = BigInt(Math.round(quantity * 1e6));
  return fromMicro((toMicro(price) * q + MICRO - 1n) / MICRO);
}

/** Longest duration the model's schema allows, for reserving a duration of `auto`. */
function maxDuration(model: MediaModelDefinition): number {
  const schema = model.parameters.properties?.duration;
  const branches: JsonSchema[] = typeof schema === 'object' ? [schema, ...(schema.anyOf ?? []), ...(schema.oneOf ?? [])] : [];
  const max = branches.map((b) => (typeof b === 'object' && typeof b.maximum === 'number' ? b.maximum : 0)).reduce((a, b) => Math.max(a, b), 0);
  return max || MAX_AUTO_SECONDS;
}

/**
 * The usage a request asks for, reserved before it runs: images requested, or seconds of
 * video (num_frames/fps, the sum of multi_prompt durations, duration, `auto` at its maximum).
 */
export function requestedUsage(model: MediaModelDefinition, params: Readonly<Record<string, unknown>>): MediaUsage {
  // Callers price validated parameters; this guard only keeps a price from ever coming out
  // negative, NaN or absurd should an unvalidated one slip through.
  const positive = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v > 0 && v < 1e6;
  if (model.endpoint !== '/videos/generate') {
    const n = params.num_images ?? params.n;
    return { images: positive(n) ? n : 1, videoSeconds: 0 };
  }
  const fps = positive(params.fps) ? params.fps : 24;
  let seconds: number;
  if (positive(params.num_frames)) seconds = params.num_frames / fps;
  else if (Array.isArray(params.multi_prompt))
    seconds = (params.multi_prompt as { duration?: unknown }[]).reduce((sum, s) => sum + (positive(s?.duration) ? s.duration : DEFAULT_VIDEO_SECONDS), 0);
  else if (positive(params.duration)) seconds = params.duration;
  else if (params.duration === 'auto') seconds = maxDuration(model);
  else seconds = DEFAULT_VIDEO_SECONDS;
  return { images: 0, videoSeconds: seconds };
}

/** Credits for a usage at the model's price: per image, or per second of output video. */
export function usageCost(model: MediaModelDefinition, usage: MediaUsage): string {
  switch (model.pricing.method) {
    case 'per_image':
      return multiplyPrice(model.pricing.cost_per_image, usage.images);
    case 'per_video_output_second':
      return multiplyPrice(model.pricing.cost_per_second, usage.videoSeconds);
  }
}
