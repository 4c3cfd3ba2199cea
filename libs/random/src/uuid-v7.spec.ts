import { randomUUID } from 'node:crypto';
import { uuidV7, uuidV7Time } from './uuid-v7';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('uuidV7', () => {
  it('is an RFC 9562 version 7 UUID carrying the millisecond it was made in', () => {
    const before = Date.now();
    const id = uuidV7();
    const after = Date.now();
    expect(id).toMatch(UUID_V7);
    expect(uuidV7Time(id)).toBeGreaterThanOrEqual(before);
    expect(uuidV7Time(id)).toBeLessThanOrEqual(after);
    expect(uuidV7Time(uuidV7(0x0123_4567_89ab))).toBe(0x0123_4567_89ab);
    expect(uuidV7Time(randomUUID())).toBeUndefined();
  });

  it('sorts ids of later milliseconds after earlier ones, as text', () => {
    const start = Date.UTC(2026, 10, 27);
    const ids = Array.from({ length: 1_000 }, (_, i) => uuidV7(start + i * 37));
    expect([...ids].sort()).toEqual(ids);
  });

  it('keeps 74 random bits: no repeats among ids of the same millisecond', () => {
    const now = Date.now();
    const seen = new Set(Array.from({ length: 50_000 }, () => uuidV7(now)));
    expect(seen.size).toBe(50_000);
    // The random part varies in every position, the version and variant aside.
    const sample = [...seen].slice(0, 2_000);
    for (const pos of [15, 16, 17, 20, 21, 22, 24, 35]) expect(new Set(sample.map((id) => id[pos])).size).toBeGreaterThan(8);
  });
});
