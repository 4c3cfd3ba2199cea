import { fnv1a32, randomSeed, seededRandom, type Random } from '@atelier/random';

export type Rng = Random;

/**
 * The generator for one request: the caller's seed (any safe integer) mixed with the prompt,
 * so the same seed and prompt always give the same output; without a seed, a random one.
 */
export function requestRng(seed: number | undefined, prompt: string): Rng {
  const base = seed === undefined ? randomSeed() : (seed % 2 ** 32) ^ Math.floor(seed / 2 ** 32);
  return seededRandom(fnv1a32(prompt, base >>> 0 || 0x811c9dc5));
}
