import { ApiError } from '@atelier/contracts';

export interface Size {
  width: number;
  height: number;
}

/** fal-style size presets (image_size). */
export const IMAGE_SIZE_PRESETS: Readonly<Record<string, Size>> = {
  square_hd: { width: 1024, height: 1024 },
  square: { width: 512, height: 512 },
  portrait_4_3: { width: 768, height: 1024 },
  portrait_16_9: { width: 576, height: 1024 },
  landscape_4_3: { width: 1024, height: 768 },
  landscape_16_9: { width: 1024, height: 576 },
};

const ONE_MEGAPIXEL = 1024 * 1024;

export function parseAspectRatio(value: string): { w: number; h: number } {
  const m = /^(\d{1,3}):(\d{1,3})$/.exec(value);
  if (!m || Number(m[1]) === 0 || Number(m[2]) === 0) throw ApiError.badRequest(`aspect_ratio must look like 16:9, got '${value}'`);
  return { w: Number(m[1]), h: Number(m[2]) };
}

/**
 * The exact aspect ratio at about one megapixel: w = a*k, h = b*k, so the output's ratio is
 * exactly the one asked for (16:9 -> 1360x765, 1:1 -> 1024x1024).
 */
export function sizeForAspectRatio(aspect: string, pixels = ONE_MEGAPIXEL): Size {
  const { w, h } = parseAspectRatio(aspect);
  const k = Math.max(1, Math.round(Math.sqrt(pixels / (w * h))));
  return { width: w * k, height: h * k };
}

/** image_size preset > width/height > aspect_ratio > 1024x1024. One of width/height keeps the aspect ratio. */
export function imageSize(params: Readonly<Record<string, unknown>>): Size {
  const preset = typeof params.image_size === 'string' ? IMAGE_SIZE_PRESETS[params.image_size] : undefined;
  if (preset) return { ...preset };
  const base = typeof params.aspect_ratio === 'string' && params.aspect_ratio !== 'auto' ? sizeForAspectRatio(params.aspect_ratio) : { width: 1024, height: 1024 };
  const width = typeof params.width === 'number' ? params.width : undefined;
  const height = typeof params.height === 'number' ? params.height : undefined;
  if (width && height) return { width, height };
  if (width) return { width, height: Math.max(1, Math.round((width * base.height) / base.width)) };
  if (height) return { width: Math.max(1, Math.round((height * base.width) / base.height)), height };
  return base;
}

const even = (n: number) => Math.max(2, Math.round(n / 2) * 2);

/**
 * Video frame size: H.264 in yuv420p needs even sides. `resolution` names the short side
 * (720p: 1280x720 landscape, 720x1280 portrait); `aspect` may come from a reference input.
 */
export function videoSize(params: Readonly<Record<string, unknown>>, aspect: { w: number; h: number }): Size {
  const width = typeof params.width === 'number' ? params.width : undefined;
  const height = typeof params.height === 'number' ? params.height : undefined;
  if (width && height) return { width: even(width), height: even(height) };
  const short = { '480p': 480, '720p': 720, '1080p': 1080 }[String(params.resolution ?? '720p')] ?? 720;
  let size: Size =
    aspect.w >= aspect.h ? { width: (short * aspect.w) / aspect.h, height: short } : { width: short, height: (short * aspect.h) / aspect.w };
  if (width) size = { width, height: (width * aspect.h) / aspect.w };
  else if (height) size = { width: (height * aspect.w) / aspect.h, height };
  return { width: even(size.width), height: even(size.height) };
}
