import { randomInt } from 'node:crypto';

export type Rng = () => number;

/** mulberry32: tiny, fast, and good enough to make sampling reproducible for a seed. */
export function mulberry32(seed: number): Rng {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** FNV-1a over a string, folded into a 32-bit seed. */
export function hash32(text: string, basis = 0x811c9dc5): number {
  let h = basis >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/**
 * The generator for one request: the caller's seed (any safe integer) mixed with the prompt,
 * so the same seed and prompt always give the same output; without a seed, a random one.
 */
export function requestRng(seed: number | undefined, prompt: string): Rng {
  const base = seed === undefined ? randomInt(0, 2 ** 32) : (seed % 2 ** 32) ^ Math.floor(seed / 2 ** 32);
  return mulberry32(hash32(prompt, base >>> 0 || 0x811c9dc5));
}

export function pick<T>(items: readonly T[], rng: Rng): T {
  return items[Math.floor(rng() * items.length) % items.length];
}
