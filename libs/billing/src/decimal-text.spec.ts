import { Prisma } from '@atelier/db';
import { canonicalDecimal } from './decimal-text';

/** A small deterministic generator, so a failure can be reproduced. */
function lcg(seed: number) {
  let x = seed;
  return (n: number) => Math.floor(((x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * n);
}

describe('canonicalDecimal', () => {
  it('gives what Decimal.toFixed() gives, for Postgres numeric text and for what callers pass', () => {
    const next = lcg(11);
    const digits = (n: number) => Array.from({ length: n }, () => String(next(10))).join('');
    for (let i = 0; i < 5_000; i++) {
      // Leading zeros, trailing zeros, zero itself and negative zero all come up often.
      const whole = next(4) === 0 ? '0'.repeat(1 + next(3)) : `${'0'.repeat(next(2))}${digits(1 + next(14))}`;
      const fraction = next(3) === 0 ? '' : `.${next(4) === 0 ? '0'.repeat(1 + next(6)) : `${digits(next(6))}${'0'.repeat(next(4))}`}`;
      const text = `${next(3) === 0 ? '-' : ''}${whole}${fraction === '.' ? '' : fraction}`;
      expect([text, canonicalDecimal(text)]).toEqual([text, new Prisma.Decimal(text).toFixed()]);
    }
  });

  it.each([
    ['0.000020', '0.00002'],
    ['-0.000000', '0'],
    ['007.50', '7.5'],
    ['-12.0', '-12'],
    ['1e5', '100000'],
  ])('%s -> %s', (text, expected) => expect(canonicalDecimal(text)).toBe(expected));
});
