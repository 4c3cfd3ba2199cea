import type { ImageStyle } from '@atelier/contracts';
import { fnv1a32, pick, range, seededRandom, type Random } from '@atelier/random';

/**
 * The procedural "model" behind local-image and local-video: a layered landscape (sky, sun or
 * moon, clouds or stars, terrain, water, trees or a skyline, and one shape per prompt word)
 * drawn as SVG and rasterised by sharp/librsvg. Palette and elements come from the prompt's
 * words, placement from the seed, so the same prompt and seed always give the same picture.
 */
export interface SceneOptions {
  prompt: string;
  negativePrompt?: string;
  seed: number;
  width: number;
  height: number;
  /** num_inference_steps (1-50): more steps, more detail (ridge points, layers, stars, trees). */
  steps: number;
  /** guidance_scale (0-20): higher means more saturated, more "on prompt" colours. */
  guidance?: number;
  /** A fine-tune's learned style: its hues and saturation replace the prompt's, its horizon places the land. */
  style?: ImageStyle;
}

const COLOR_HUES: Readonly<Record<string, number>> = {
  red: 0, crimson: 350, scarlet: 5, orange: 28, amber: 40, gold: 45, golden: 45, yellow: 55, lime: 90, green: 120, emerald: 140,
  teal: 175, cyan: 185, turquoise: 175, aqua: 185, blue: 215, azure: 205, navy: 230, indigo: 255, violet: 275, purple: 280,
  magenta: 300, pink: 330, rose: 340, brown: 25,
};

type Terrain = 'mountains' | 'hills' | 'dunes' | 'city' | 'waves';

interface Mood {
  night: boolean;
  sunset: boolean;
  water: boolean;
  forest: boolean;
  snow: boolean;
  terrain: Terrain;
  clouds: boolean;
}

function words(text: string | undefined): string[] {
  return (text ?? '').toLowerCase().match(/[a-z0-9]+/g) ?? [];
}

function has(list: readonly string[], ...keys: string[]): boolean {
  return keys.some((k) => list.includes(k) || list.includes(`${k}s`));
}

function moodOf(prompt: string[], negative: string[], random: Random): Mood {
  const want = (...keys: string[]) => has(prompt, ...keys) && !has(negative, ...keys);
  const terrain: Terrain = want('city', 'skyline', 'building', 'street', 'town')
    ? 'city'
    : want('desert', 'dune', 'sand', 'sahara')
      ? 'dunes'
      : want('ocean', 'sea', 'wave', 'surf')
        ? 'waves'
        : want('mountain', 'peak', 'alps', 'cliff', 'volcano')
          ? 'mountains'
          : want('hill', 'meadow', 'field', 'valley', 'countryside')
            ? 'hills'
            : pick(random, ['mountains', 'hills', 'dunes'] as const);
  const night = want('night', 'moon', 'star', 'space', 'galaxy', 'midnight', 'dark', 'cosmic');
  return {
    night,
    sunset: !night && want('sunset', 'sunrise', 'dusk', 'dawn', 'evening', 'golden'),
    water: want('lake', 'river', 'water', 'ocean', 'sea', 'reflection', 'beach', 'pond'),
    forest: want('forest', 'tree', 'wood', 'pine', 'jungle'),
    snow: want('snow', 'winter', 'ice', 'frozen', 'glacier'),
    terrain,
    clouds: !night && !has(negative, 'cloud') && (want('cloud', 'sky', 'storm', 'rain') || random() < 0.6),
  };
}

export interface Hsl {
  h: number;
  s: number;
  l: number;
}

export function hsl(c: Hsl, alpha?: number): string {
  const h = ((c.h % 360) + 360) % 360;
  const s = Math.min(100, Math.max(0, c.s));
  const l = Math.min(100, Math.max(0, c.l));
  return alpha === undefined ? `hsl(${h.toFixed(1)},${s.toFixed(1)}%,${l.toFixed(1)}%)` : `hsla(${h.toFixed(1)},${s.toFixed(1)}%,${l.toFixed(1)}%,${alpha.toFixed(3)})`;
}

/** Base hues: colour words of the prompt (minus those the negative prompt names), else a hue from the prompt's hash. */
export function promptHues(prompt: string, negativePrompt?: string): number[] {
  const banned = new Set(words(negativePrompt).filter((w) => w in COLOR_HUES).map((w) => COLOR_HUES[w]));
  const hues = words(prompt)
    .filter((w) => w in COLOR_HUES)
    .map((w) => COLOR_HUES[w])
    .filter((h) => !banned.has(h));
  if (hues.length > 0) return [...new Set(hues)];
  let h = fnv1a32(prompt.trim().toLowerCase()) % 360;
  // Steer clear of banned colours when the hash happens to land on one.
  for (let i = 0; i < 12 && [...banned].some((b) => Math.abs(((h - b + 540) % 360) - 180) < 25); i++) h = (h + 47) % 360;
  return [h];
}

const fmt = (n: number) => (Math.round(n * 10) / 10).toString();

function ridge(random: Random, width: number, bottom: number, baseY: number, amplitude: number, points: number, terrain: Terrain): string {
  const ys: number[] = [];
  const phase = random() * Math.PI * 2;
  const freq = range(random, 1.2, 3.2);
  for (let i = 0; i <= points; i++) {
    const x = i / points;
    let y: number;
    switch (terrain) {
      case 'mountains': {
        // Sum of sharp triangle waves: jagged peaks.
        const tri = (f: number, p: number) => Math.abs(((x * f + p) % 1) * 2 - 1);
        y = 0.6 * tri(freq, phase) + 0.3 * tri(freq * 2.7, phase * 1.3) + 0.1 * random();
        break;
      }
      case 'dunes':
        y = Math.pow(Math.abs(Math.sin(x * Math.PI * freq + phase)), 1.5) * 0.8 + 0.05 * random();
        break;
      case 'waves':
        y = 0.5 + 0.35 * Math.sin(x * Math.PI * 2 * freq * 3 + phase) + 0.05 * random();
        break;
      default:
        y = 0.5 + 0.3 * Math.sin(x * Math.PI * 2 * freq + phase) + 0.2 * Math.sin(x * Math.PI * 5.3 * freq + phase * 2) * 0.5 + 0.04 * random();
    }
    ys.push(y);
  }
  const pts = ys.map((y, i) => `${fmt((i / points) * width)} ${fmt(baseY - y * amplitude)}`);
  return `M0 ${fmt(bottom)} L${pts.join(' L')} L${fmt(width)} ${fmt(bottom)} Z`;
}

/** Builds the SVG document of a scene. Pure: same options, same string. */
export function sceneSvg(options: SceneOptions): string {
  const { width: W, height: H } = options;
  const prompt = words(options.prompt);
  const negative = words(options.negativePrompt);
  const random = seededRandom(fnv1a32(options.prompt.trim().toLowerCase()) ^ options.seed);
  const detail = Math.min(50, Math.max(1, Math.round(options.steps))) / 50;
  const saturation = options.style ? options.style.saturation : 30 + Math.min(20, Math.max(0, options.guidance ?? 3.5)) * 3;
  const mood = moodOf(prompt, negative, random);
  const hues = options.style?.hues.length ? options.style.hues : promptHues(options.prompt, options.negativePrompt);
  const base = hues[0];
  const accent = hues[1] ?? (base + range(random, 140, 220)) % 360;
  const minSide = Math.min(W, H);
  const parts: string[] = [];
  const defs: string[] = [];

  // Sky
  // The sky carries the prompt's own colour, so "a purple dream" is visibly purple.
  // A learned style paints the sky in its own hues and lightness, whatever the time of day the prompt asks for.
  const style = options.style;
  const sky: Hsl[] = style
    ? [
        { h: base, s: saturation, l: style.lightness * 0.85 },
        { h: hues[1] ?? base, s: saturation * 0.95, l: style.lightness },
        { h: hues[2] ?? base, s: saturation * 0.8, l: Math.min(92, style.lightness + 15) },
      ]
    : mood.night
    ? [{ h: base, s: saturation * 0.5, l: 6 }, { h: base, s: saturation * 0.6, l: 14 }, { h: base + 15, s: saturation * 0.7, l: 26 }]
    : mood.sunset
      ? [{ h: base - 40, s: saturation * 0.7, l: 30 }, { h: base - 10, s: saturation, l: 50 }, { h: base + 15, s: saturation + 20, l: 65 }]
      : [{ h: base, s: saturation, l: 42 }, { h: base + 8, s: saturation * 0.9, l: 62 }, { h: base + 25, s: saturation * 0.6, l: 84 }];
  defs.push(
    `<linearGradient id="sky" x1="0" y1="0" x2="0" y2="1"><stop offset="0" stop-color="${hsl(sky[0])}"/><stop offset="0.55" stop-color="${hsl(sky[1])}"/><stop offset="1" stop-color="${hsl(sky[2])}"/></linearGradient>`,
  );
  parts.push(`<rect width="${W}" height="${H}" fill="url(#sky)"/>`);

  // Stars
  if (mood.night) {
    const stars = Math.round(20 + 380 * detail);
    for (let i = 0; i < stars; i++)
      parts.push(`<circle cx="${fmt(random() * W)}" cy="${fmt(random() * H * 0.7)}" r="${fmt(range(random, 0.4, 1.8) * (minSide / 1024))}" fill="#fff" fill-opacity="${range(random, 0.3, 1).toFixed(2)}"/>`);
  }

  // Sun or moon with a glow
  if (!has(negative, 'sun', 'moon')) {
    const glow: Hsl = mood.night ? { h: base + 200, s: 20, l: 92 } : mood.sunset ? { h: 38, s: 95, l: 70 } : { h: 50, s: 90, l: 88 };
    defs.push(
      `<radialGradient id="glow"><stop offset="0" stop-color="${hsl({ ...glow, l: 97 })}"/><stop offset="0.3" stop-color="${hsl(glow)}" stop-opacity="0.95"/><stop offset="1" stop-color="${hsl(glow)}" stop-opacity="0"/></radialGradient>`,
    );
    const r = range(random, 0.08, 0.16) * minSide;
    parts.push(`<circle cx="${fmt(range(random, 0.15, 0.85) * W)}" cy="${fmt(range(random, 0.12, mood.sunset ? 0.5 : 0.35) * H)}" r="${fmt(r * 2.2)}" fill="url(#glow)"/>`);
  }

  // Clouds
  if (mood.clouds) {
    const clouds = Math.round(2 + 10 * detail);
    for (let i = 0; i < clouds; i++) {
      const cx = random() * W;
      const cy = range(random, 0.05, 0.4) * H;
      const puffs = 3 + Math.floor(random() * 4);
      const l = mood.sunset ? 80 : 96;
      for (let p = 0; p < puffs; p++)
        parts.push(
          `<ellipse cx="${fmt(cx + (p - puffs / 2) * minSide * 0.04)}" cy="${fmt(cy + range(random, -0.015, 0.015) * H)}" rx="${fmt(range(random, 0.04, 0.08) * minSide)}" ry="${fmt(range(random, 0.02, 0.04) * minSide)}" fill="${hsl({ h: base + 20, s: 25, l })}" fill-opacity="${range(random, 0.45, 0.85).toFixed(2)}"/>`,
        );
    }
  }

  // Subject shapes: one per distinct prompt word, so different prompts differ in form as well as colour.
  const subjects = [...new Set(prompt)].filter((w) => w.length > 2 && !(w in COLOR_HUES)).slice(0, 8);
  for (const word of subjects) {
    const wr = seededRandom(fnv1a32(word) ^ options.seed);
    const cx = range(wr, 0.1, 0.9) * W;
    const cy = range(wr, 0.2, 0.6) * H;
    const r = range(wr, 0.02, 0.06) * minSide;
    const color = hsl({ h: fnv1a32(word) % 360, s: saturation, l: mood.night ? 55 : 45 }, 0.55);
    const kind = fnv1a32(word) % 3;
    if (kind === 0) parts.push(`<circle cx="${fmt(cx)}" cy="${fmt(cy)}" r="${fmt(r)}" fill="${color}"/>`);
    else if (kind === 1) parts.push(`<rect x="${fmt(cx - r)}" y="${fmt(cy - r)}" width="${fmt(2 * r)}" height="${fmt(2 * r)}" rx="${fmt(r * 0.2)}" fill="${color}" transform="rotate(${fmt(wr() * 90)} ${fmt(cx)} ${fmt(cy)})"/>`);
    else parts.push(`<path d="M${fmt(cx)} ${fmt(cy - r)} L${fmt(cx + r)} ${fmt(cy + r)} L${fmt(cx - r)} ${fmt(cy + r)} Z" fill="${color}"/>`);
  }

  // Terrain: back to front, darker/more saturated in front; more steps, more layers and finer ridges.
  // A learned style's horizon is where its pictures' brightness changes most.
  const horizon = style ? Math.min(0.8, Math.max(0.3, style.horizon)) : mood.water ? 0.62 : 0.55;
  const layers = 2 + Math.round(3 * detail);
  const points = Math.round(12 + 240 * detail);
  for (let i = 0; i < layers; i++) {
    const depth = i / Math.max(1, layers - 1);
    const baseY = H * (horizon + (mood.water ? 0.02 : 0.1) * depth + 0.05);
    const amplitude = H * (mood.terrain === 'city' ? 0 : mood.terrain === 'mountains' ? 0.3 - 0.12 * depth : 0.16 - 0.06 * depth);
    const color: Hsl =
      mood.snow && i === 0
        ? { h: base + 200, s: 15, l: 88 }
        : { h: (mood.terrain === 'dunes' && !style ? 35 : accent) + depth * (style ? 5 : 20), s: saturation * (0.4 + 0.4 * depth), l: (mood.night ? 22 : 55) - depth * (mood.night ? 14 : 32) };
    if (mood.terrain === 'city') {
      let x = -random() * 40;
      while (x < W) {
        const bw = range(random, 0.03, 0.08) * W;
        const bh = range(random, 0.1, 0.35) * H * (1 - 0.3 * depth);
        parts.push(`<rect x="${fmt(x)}" y="${fmt(baseY - bh)}" width="${fmt(bw)}" height="${fmt(bh + H)}" fill="${hsl(color)}"/>`);
        if (i === layers - 1) {
          const windows = Math.round(detail * 12);
          for (let k = 0; k < windows; k++)
            parts.push(`<rect x="${fmt(x + range(random, 0.1, 0.8) * bw)}" y="${fmt(baseY - bh + range(random, 0.05, 0.9) * bh)}" width="${fmt(bw * 0.1)}" height="${fmt(bw * 0.12)}" fill="${hsl({ h: 50, s: 90, l: mood.night ? 70 : 85 }, 0.8)}"/>`);
        }
        x += bw + range(random, 0, 0.01) * W;
      }
    } else {
      parts.push(`<path d="${ridge(random, W, H, baseY, amplitude, points, mood.terrain)}" fill="${hsl(color)}"/>`);
    }
  }

  // Trees along the front
  if (mood.forest) {
    const trees = Math.round(6 + 60 * detail);
    const front: Hsl = { h: 130, s: saturation * 0.6, l: mood.night ? 10 : 22 };
    for (let i = 0; i < trees; i++) {
      const x = random() * W;
      const y = H * range(random, horizon + 0.12, 0.98);
      const h = range(random, 0.05, 0.14) * H;
      parts.push(`<path d="M${fmt(x)} ${fmt(y - h)} L${fmt(x + h * 0.3)} ${fmt(y)} L${fmt(x - h * 0.3)} ${fmt(y)} Z" fill="${hsl(front)}"/>`);
    }
  }

  // Water with reflection streaks
  if (mood.water) {
    const top = H * (horizon + 0.12);
    defs.push(
      `<linearGradient id="water" x1="0" y1="0" x2="0" y2="1"><stop offset="0" stop-color="${hsl({ ...sky[2], l: sky[2].l * 0.8 })}"/><stop offset="1" stop-color="${hsl({ ...sky[0], l: sky[0].l * 0.6 })}"/></linearGradient>`,
    );
    parts.push(`<rect x="0" y="${fmt(top)}" width="${W}" height="${fmt(H - top)}" fill="url(#water)"/>`);
    const streaks = Math.round(8 + 60 * detail);
    for (let i = 0; i < streaks; i++)
      parts.push(`<rect x="${fmt(random() * W)}" y="${fmt(range(random, top, H))}" width="${fmt(range(random, 0.02, 0.12) * W)}" height="${fmt(Math.max(1, H * 0.003))}" fill="#fff" fill-opacity="${range(random, 0.08, 0.3).toFixed(2)}"/>`);
  }

  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}"><defs>${defs.join('')}</defs>${parts.join('')}</svg>`;
}

/** A glowing orb in the prompt's accent colour, used by local-video as a moving element. */
export function spriteSvg(prompt: string, size: number): string {
  const hue = (promptHues(prompt)[0] + 30) % 360;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${size}" height="${size}"><defs><radialGradient id="s"><stop offset="0" stop-color="${hsl({ h: hue, s: 90, l: 92 })}"/><stop offset="0.35" stop-color="${hsl({ h: hue, s: 85, l: 65 })}" stop-opacity="0.9"/><stop offset="1" stop-color="${hsl({ h: hue, s: 85, l: 55 })}" stop-opacity="0"/></radialGradient></defs><circle cx="${size / 2}" cy="${size / 2}" r="${size / 2}" fill="url(#s)"/></svg>`;
}
