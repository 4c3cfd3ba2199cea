import { parseApiInstant } from './api-instant';

describe('parseApiInstant (ISO 8601 or Unix seconds)', () => {
  it('reads Unix seconds as a number or as digits, and ISO 8601 times and dates (a date is its UTC midnight)', () => {
    expect(parseApiInstant(1_790_000_000)?.toISOString()).toBe('2026-09-21T14:13:20.000Z');
    expect(parseApiInstant('1790000000')?.toISOString()).toBe('2026-09-21T14:13:20.000Z');
    expect(parseApiInstant('2026-11-29')?.toISOString()).toBe('2026-11-29T00:00:00.000Z');
    expect(parseApiInstant('2026-11-29T10:30:00Z')?.toISOString()).toBe('2026-11-29T10:30:00.000Z');
    expect(parseApiInstant('2026-11-29T10:30:00+02:00')?.toISOString()).toBe('2026-11-29T08:30:00.000Z');
    expect(parseApiInstant('2026-11-29 10:30')?.getUTCDate()).toBe(29);
  });

  it('refuses anything else', () => {
    for (const bad of ['tomorrow', '', '2026-13-45', '2026-11-29T25:00:00Z', '29/11/2026', -1, Number.NaN, Infinity, 1e13, '1e9', true, null, {}, ['2026-11-29']])
      expect({ bad, parsed: parseApiInstant(bad) }).toEqual({ bad, parsed: undefined });
  });
});
