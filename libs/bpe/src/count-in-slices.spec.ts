import { fc } from '@atelier/testing';
import { countInSlices, MAX_RUN_CHARS } from './count-in-slices';

/** How countInSlices found long runs before it scanned for them in one pass: with patterns, as the reference. */
function slicesByPattern(text: string): string[] {
  const pieces: string[] = [];
  const count = (piece: string) => (pieces.push(piece), 1);
  const longStart = /\S{129}|\s{129}/g;
  let last = 0;
  for (let found = longStart.exec(text); found; found = longStart.exec(text)) {
    const next = /\s/.test(found[0][0]) ? /\S/g : /\s/g;
    next.lastIndex = found.index + found[0].length;
    const runEnd = next.exec(text)?.index ?? text.length;
    longStart.lastIndex = runEnd;
    if (found.index > last) count(text.slice(last, found.index));
    for (let start = found.index; start < runEnd; ) {
      let end = Math.min(start + MAX_RUN_CHARS, runEnd);
      const code = text.charCodeAt(end - 1);
      if (end < runEnd && code >= 0xd800 && code <= 0xdbff) end--;
      count(text.slice(start, end));
      start = end;
    }
    last = runEnd;
  }
  if (last < text.length) count(last === 0 ? text : text.slice(last));
  return pieces;
}

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

  it('cuts text where runs of every kind of JavaScript whitespace begin and end, as the patterns did', () => {
    // Runs of one character around the slice length, of spaces JavaScript's \s holds and of look-alikes it does not.
    const unit = fc.constantFrom('a', ' ', '\t', '\n', '\u00a0', '\u1680', '\u2000', '\u200a', '\u2028', '\u202f', '\u3000', '\ufeff', '\u200b', '\u180e', '中', '😀');
    const run = fc.tuple(unit, fc.integer({ min: 1, max: 300 })).map(([u, n]) => u.repeat(n));
    fc.assert(
      fc.property(fc.array(run, { maxLength: 8 }), (runs) => {
        const text = runs.join('');
        const r = recording();
        countInSlices(text, r.count);
        expect(r.pieces).toEqual(text.length <= MAX_RUN_CHARS ? (text ? [text] : []) : slicesByPattern(text));
      }),
      { numRuns: 2000 },
    );
  });
});
