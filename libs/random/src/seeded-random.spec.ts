import { fnv1a32, pick, seededRandom } from './seeded-random';

describe('seeded random numbers', () => {
  it('repeats exactly for a seed and differs between seeds', () => {
    const draw = (seed: number) => Array.from({ length: 5 }, seededRandom(seed));
    expect(draw(42)).toEqual(draw(42));
    expect(draw(42)).not.toEqual(draw(43));
    for (const n of draw(7)) expect(n >= 0 && n < 1).toBe(true);
  });

  it('hashes prompts to the published FNV-1a values, so seeds are the same on every machine', () => {
    // Reference values of 32-bit FNV-1a.
    expect(fnv1a32('')).toBe(0x811c9dc5);
    expect(fnv1a32('a')).toBe(0xe40c292c);
    expect(fnv1a32('foobar')).toBe(0xbf9cf968);
  });

  it('picks every item of a list over enough draws', () => {
    const random = seededRandom(1);
    const seen = new Set(Array.from({ length: 200 }, () => pick(random, ['a', 'b', 'c'])));
    expect([...seen].sort()).toEqual(['a', 'b', 'c']);
  });
});
