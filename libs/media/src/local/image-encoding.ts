import type { Sharp } from './libvips';
import type { EngineOutput } from '../engine';

export type ImageFormat = 'png' | 'jpg' | 'webp';

const CONTENT_TYPES: Readonly<Record<ImageFormat, string>> = { png: 'image/png', jpg: 'image/jpeg', webp: 'image/webp' };

export function outputFormat(params: Readonly<Record<string, unknown>>): ImageFormat {
  const f = params.output_format;
  return f === 'jpg' || f === 'jpeg' ? 'jpg' : f === 'webp' ? 'webp' : 'png';
}

/** output_quality may be an integer or a named level on some models. */
export function outputQuality(params: Readonly<Record<string, unknown>>): number {
  const q = params.output_quality;
  if (typeof q === 'number') return Math.min(100, Math.max(1, Math.round(q)));
  if (q === 'low') return 50;
  if (q === 'high' || q === 'hd') return 95;
  return 80;
}

/**
 * Encodes with fixed settings so equal pixels give equal bytes (seeded calls are byte-identical).
 * Metadata is dropped: no timestamps, nothing that would vary between runs.
 */
export async function encodeImage(image: Sharp, format: ImageFormat, quality: number): Promise<EngineOutput> {
  const encoded =
    format === 'png'
      ? image.png({ compressionLevel: 6, adaptiveFiltering: false })
      : format === 'jpg'
        ? image.flatten({ background: '#ffffff' }).jpeg({ quality, mozjpeg: false })
        : image.webp({ quality, effort: 2 });
  const { data, info } = await encoded.toBuffer({ resolveWithObject: true });
  return { data, contentType: CONTENT_TYPES[format], extension: format, width: info.width, height: info.height };
}
