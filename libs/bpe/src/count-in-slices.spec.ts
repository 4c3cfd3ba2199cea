import { countInSlices, MAX_RUN_CHARS } from './count-in-slices';

describe('countInSlices', () => {
  /** A counter that records what it was asked to count. */
  const recording = () => {
    const pieces: string[] = [];
    return { pieces, count: (piece: string) => (pieces.push(piece), piece.length) };
  };

  it('hands ordinary text to the counter whole', () => {
    const r = recording();
    const text = 'short words only, '.repeat(100);
    expect(countInSlices(text, r.count)).toBe(text.length);
    expect(r.pieces).toEqual([text]);
  });

  it('never hands the counter a run longer than the slice, and loses no character', () => {
    for (const text of [`intro ${'A'.repeat(1000)} outro`, ' '.repeat(500), `${'中'.repeat(300)}x`, '😀'.repeat(400)]) {
      const r = recording();
      expect(countInSlices(text, r.count)).toBe(text.length);
      expect(r.pieces.join('')).toBe(text);
      expect(Math.max(...r.pieces.map((p) => (/\s/.test(p) && /\S/.test(p) ? 0 : p.length)))).toBeLessThanOrEqual(MAX_RUN_CHARS);
    }
  });

  it('keeps surrogate pairs together', () => {
    const r = recording();
    countInSlices('😀'.repeat(400), r.count);
    for (const piece of r.pieces) expect(piece).toMatch(/^(?:[\ud800-\udbff][\udc00-\udfff])+$/);
  });

  it('stops handing the counter slices once the total passes stopAbove', () => {
    const r = recording();
    const text = 'A'.repeat(100_000);
    const total = countInSlices(text, r.count, 1_000);
    expect(total).toBeGreaterThan(1_000);
    expect(total).toBeLessThanOrEqual(1_000 + MAX_RUN_CHARS);
    expect(r.pieces.join('').length).toBe(total);
    // Without a bound, every slice is counted.
    expect(countInSlices(text, recording().count)).toBe(100_000);
  });

  it('follows runs of millions of characters (a 10 MiB prompt) without overflowing the regexp stack', () => {
    for (const unit of ['A', ' ', '中']) {
      const text = `x ${unit.repeat(10 << 20)} y`;
      const r = recording();
      expect(countInSlices(text, r.count)).toBe(text.length);
      expect(r.pieces.join('')).toBe(text);
      expect(Math.max(...r.pieces.map((p) => p.length))).toBeLessThanOrEqual(MAX_RUN_CHARS + 1);
    }
  });
});
