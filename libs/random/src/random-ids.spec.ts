import { randomToken } from './random-ids';

describe('randomToken', () => {
  it('gives base64url tokens of the asked length, none repeated across many pool refills', () => {
    const seen = new Set<string>();
    // 18 bytes each: 20,000 draws cross the 4 KiB pool ~90 times.
    for (let i = 0; i < 20_000; i++) {
      const token = randomToken(18);
      expect(token).toMatch(/^[A-Za-z0-9_-]{24}$/);
      seen.add(token);
    }
    expect(seen.size).toBe(20_000);
  });

  it('spreads its bytes evenly (no zeroed or stuck bytes)', () => {
    const counts = new Array<number>(256).fill(0);
    for (let i = 0; i < 4_000; i++) for (const b of Buffer.from(randomToken(32), 'base64url')) counts[b]++;
    // 128,000 bytes over 256 values: ~500 each; a stuck or zero-filled byte would blow this up.
    expect(Math.max(...counts)).toBeLessThan(650);
    expect(Math.min(...counts)).toBeGreaterThan(350);
  });

  it('serves requests larger than its pool', () => {
    expect(Buffer.from(randomToken(10_000), 'base64url')).toHaveLength(10_000);
  });
});
