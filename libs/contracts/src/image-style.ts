/**
 * What the built-in trainer learns from a dataset's images for atelier/local-image, and what a
 * deployed checkpoint of it (its adapter_model.json) makes local-image paint with: the images'
 * dominant hues, their saturation and lightness, and where their horizon sits.
 */
export interface ImageStyle {
  format: 'atelier-image-style-v1';
  /** Dominant hues (degrees), most common first. */
  hues: number[];
  /** Mean saturation and lightness, 0-100. */
  saturation: number;
  lightness: number;
  /** Where the largest change of brightness sits, from the top (0-1). */
  horizon: number;
  /** How many images it was learned from. */
  images: number;
}

export const IMAGE_STYLE_FORMAT = 'atelier-image-style-v1';

export function parseImageStyle(text: string): ImageStyle {
  const parsed = JSON.parse(text) as Partial<ImageStyle>;
  const finite = (v: unknown) => typeof v === 'number' && Number.isFinite(v);
  if (parsed?.format !== IMAGE_STYLE_FORMAT || !Array.isArray(parsed.hues) || !parsed.hues.every(finite) || !finite(parsed.saturation) || !finite(parsed.lightness) || !finite(parsed.horizon))
    throw new Error(`not an ${IMAGE_STYLE_FORMAT} file`);
  return parsed as ImageStyle;
}
