import { IMAGE_STYLE_FORMAT, type ImageStyle } from '@atelier/contracts';

const BINS = 36;
/** The images are looked at this small: a palette and a horizon need no more. */
export const STYLE_SAMPLE_SIZE = 24;

/** What a style checkpoint holds beyond the style itself, so a resumed run learns on from it. */
export interface ImageStyleState extends ImageStyle {
  hist: number[];
  sums: { saturation: number; lightness: number; horizon: number; pixels: number };
}

function hsl(r: number, g: number, b: number): [number, number, number] {
  const [rn, gn, bn] = [r / 255, g / 255, b / 255];
  const max = Math.max(rn, gn, bn);
  const min = Math.min(rn, gn, bn);
  const l = (max + min) / 2;
  if (max === min) return [0, 0, l * 100];
  const d = max - min;
  const s = l > 0.5 ? d / (2 - max - min) : d / (max + min);
  const h = max === rn ? (gn - bn) / d + (gn < bn ? 6 : 0) : max === gn ? (bn - rn) / d + 2 : (rn - gn) / d + 4;
  return [h * 60, s * 100, l * 100];
}

/** One image's hue histogram (weighted by saturation), mean saturation and lightness, and horizon row. */
export function describeImage(rgb: Buffer, width: number, height: number) {
  const hist = new Array<number>(BINS).fill(0);
  let saturation = 0;
  let lightness = 0;
  const rows = new Array<number>(height).fill(0);
  for (let y = 0; y < height; y++)
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 3;
      const [h, s, l] = hsl(rgb[i], rgb[i + 1], rgb[i + 2]);
      hist[Math.floor(h / 10) % BINS] += s / 100;
      saturation += s;
      lightness += l;
      rows[y] += l;
    }
  let horizon = 0.5;
  let jump = -1;
  for (let y = 1; y < height; y++) {
    const d = Math.abs(rows[y] - rows[y - 1]);
    if (d > jump) [jump, horizon] = [d, y / height];
  }
  const pixels = width * height;
  return { hist, saturation: saturation / pixels, lightness: lightness / pixels, horizon };
}

/** The style learned so far: images added one by one; loss against held-out images. */
export class StyleLearner {
  hist = new Array<number>(BINS).fill(0);
  sums = { saturation: 0, lightness: 0, horizon: 0, pixels: 0 };
  images = 0;

  learn(image: ReturnType<typeof describeImage>): void {
    image.hist.forEach((v, i) => (this.hist[i] += v));
    this.sums.saturation += image.saturation;
    this.sums.lightness += image.lightness;
    this.sums.horizon += image.horizon;
    this.images++;
  }

  /** The three strongest hues (bin centres), strongest first. */
  hues(): number[] {
    return this.hist
      .map((v, i) => ({ v, h: i * 10 + 5 }))
      .filter((b) => b.v > 0)
      .sort((a, b) => b.v - a.v)
      .slice(0, 3)
      .map((b) => b.h);
  }

  /**
   * The share of the held-out images' colour (saturation-weighted) whose hue is more than 20°
   * from every learned hue: 1 before anything is learned, falling as the palette fits them.
   */
  loss(heldOut: ReturnType<typeof describeImage>[]): number {
    const hues = this.hues();
    let total = 0;
    let far = 0;
    for (const image of heldOut)
      image.hist.forEach((v, i) => {
        const h = i * 10 + 5;
        total += v;
        if (!hues.some((c) => Math.abs(((h - c + 540) % 360) - 180) <= 20)) far += v;
      });
    return total === 0 ? 0 : far / total;
  }

  state(): ImageStyleState {
    const n = Math.max(1, this.images);
    return {
      format: IMAGE_STYLE_FORMAT,
      hues: this.hues(),
      saturation: Math.round((this.sums.saturation / n) * 10) / 10,
      lightness: Math.round((this.sums.lightness / n) * 10) / 10,
      horizon: Math.round((this.sums.horizon / n) * 1000) / 1000,
      images: this.images,
      hist: this.hist,
      sums: { ...this.sums, pixels: 0 },
    };
  }

  static from(state: ImageStyleState): StyleLearner {
    const learner = new StyleLearner();
    learner.hist = [...state.hist];
    learner.sums = { ...state.sums };
    learner.images = state.images;
    return learner;
  }
}
