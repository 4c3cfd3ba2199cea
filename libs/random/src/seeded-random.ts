import { randomInt } from 'node:crypto';

/** A source of numbers in [0, 1). */
export type Random = () => number;

/**
 * mulberry32: small, fast and deterministic. The local engines (chat, image, video) draw from
 * it so that the same seed and prompt give the same output on every machine.
 */
export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** 32-bit FNV-1a of a string: stable across processes and platforms, so prompts map to the same seed everywhere. */
export function fnv1a32(text: string, basis = 0x811c9dc5): number {
  let h = basis >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** A seed in the catalogs' range (0..2^32-1) for requests that did not give one. */
export function randomSeed(): number {
  return randomInt(0, 2 ** 32);
}

export function range(random: Random, min: number, max: number): number {
  return min + random() * (max - min);
}

export function pick<T>(random: Random, items: readonly T[]): T {
  return items[Math.floor(random() * items.length) % items.length];
}
