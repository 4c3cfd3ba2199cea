import { SPARE_CREDITS, sparesFor } from './spare-credits';

/** When a request's work may start beside its reservation, by how much was spare and how long ago that was read. */
describe('sparesFor', () => {
  const at = 1_000_000;

  it('says yes to a fresh reading with 100 times the request to spare, and no to less', () => {
    expect(sparesFor({ available: 100, at }, 1, at)).toBe(true);
    expect(sparesFor({ available: 99.99, at }, 1, at)).toBe(false);
    expect(sparesFor({ available: 100, at }, 1, at + SPARE_CREDITS.FRESH_MS)).toBe(true);
  });

  it('asks an older reading for proportionally more room: twice at 10 s, 12 times at a minute', () => {
    expect(sparesFor({ available: 199, at }, 1, at + 10_000)).toBe(false);
    expect(sparesFor({ available: 200, at }, 1, at + 10_000)).toBe(true);
    expect(sparesFor({ available: 1_199, at }, 1, at + 60_000)).toBe(false);
    expect(sparesFor({ available: 1_200, at }, 1, at + 60_000)).toBe(true);
    // A well-funded namespace (a million credits, a request of a thousandth) still overlaps after minutes.
    expect(sparesFor({ available: 1_000_000, at }, 0.001, at + 9 * 60_000)).toBe(true);
  });

  it('counts no reading older than 10 minutes, however much it showed', () => {
    expect(sparesFor({ available: 1e12, at }, 0.001, at + SPARE_CREDITS.MAX_AGE_MS)).toBe(true);
    expect(sparesFor({ available: 1e12, at }, 0.001, at + SPARE_CREDITS.MAX_AGE_MS + 1)).toBe('expired');
  });
});
