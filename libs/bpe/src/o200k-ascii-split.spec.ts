import { O200K_TOKEN_SPLIT_REGEX } from 'gpt-tokenizer/encodingParams/constants';
import { fc } from '@atelier/testing';
import { asciiCodes } from './compact-bpe';
import { o200kAsciiPieceEnd } from './o200k-ascii-split';

/** The piece end o200kAsciiPieceEnd finds at `start`, reading the text as CompactBpe hands it over. */
const pieceEnd = (text: string, start: number) => {
  const codes = asciiCodes(text);
  return codes ? o200kAsciiPieceEnd(codes, start, text.length) : -1;
};

/** The pieces the pattern itself finds, as [start, end]. */
function patternPieces(text: string): [number, number][] {
  const split = new RegExp(O200K_TOKEN_SPLIT_REGEX.source, 'gu');
  return [...text.matchAll(split)].map((m) => [m.index, m.index + m[0].length]);
}

/** What reaches each alternative of the pattern, and its edges: contractions, line breaks, slashes, runs of spaces. */
const asciiFragment = fc.oneof(
  fc.constantFrom('hello', ' world', 'World', 'HTTP', 'JSONParser', 'aB', 'ABc', "don't", " it's", "WE'LL", "they've", "you'Re", "'s", "'", "x'l", "x'LL"),
  fc.constantFrom('1', '12', '123', '1234567', ' 42', 'v2', '3.14'),
  fc.constantFrom(' ', '  ', '   ', '\t', '\n', '\r\n', '\n\n', ' \n ', '  \n  x', '\v', '\f', ' \t', '\r'),
  fc.constantFrom('//', '/*', '*/\n', '...', '```', '{"a":[1,2]}', '=>', ' (', ')', '"', '-', '_', '\u0000', '\u001f', '\u007f', '|---|', ' /', '/\n/'),
  fc.string({ unit: fc.integer({ min: 0, max: 127 }).map((c) => String.fromCharCode(c)), maxLength: 8 }),
);
/** ...and now and then a character outside ASCII, which may be a letter, a digit, a mark or a space. */
const otherFragment = fc.constantFrom('é', 'É', 'ß', '東京', '٣', '²', '\u0301', '\u00a0', '\u3000', '\u2028', '—', '😀', '\ufeff', '’');
const ascii = fc.array(asciiFragment, { maxLength: 30 }).map((parts) => parts.join(''));
const mixed = fc.array(fc.oneof({ arbitrary: asciiFragment, weight: 5 }, { arbitrary: otherFragment, weight: 1 }), { maxLength: 30 }).map((parts) => parts.join(''));

describe('o200kAsciiPieceEnd against the o200k pre-tokenizer pattern', () => {
  it('reads text as bytes: ASCII as itself, anything else as 0x80', () => {
    expect([...asciiCodes('a\u0000~')!.subarray(0, 3)]).toEqual([0x61, 0, 0x7e]);
    const mostlyAscii = `${'x'.repeat(80)}aé東😀\u0080z`;
    expect([...asciiCodes(mostlyAscii)!.subarray(80, 87)]).toEqual([0x61, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7a]);
    // Text mostly outside ASCII is left to the pattern whole.
    expect(asciiCodes('aé東😀\u0080z')).toBeUndefined();
    expect(asciiCodes('Комитет собрался во вторник')).toBeUndefined();
    // Into the scratch space given when it is large enough (3 bytes a character and the end mark), else a new array.
    const scratch = new Uint8Array(10);
    expect(asciiCodes('abc', scratch)).toBe(scratch);
    expect(asciiCodes('abcd', scratch)).not.toBe(scratch);
    // Scratch space holds an earlier, longer text's bytes: a word still ends where the text does.
    const reused = new Uint8Array(64);
    asciiCodes('abcdefghijklmnop', reused);
    expect(o200kAsciiPieceEnd(asciiCodes('ab', reused)!, 0, 2)).toBe(2);
    asciiCodes("x'sss", reused);
    expect(o200kAsciiPieceEnd(asciiCodes("x'", reused)!, 0, 2)).toBe(1);
  });

  it('finds every piece of ASCII text where the pattern finds it', () => {
    fc.assert(
      fc.property(ascii, (text) => {
        for (const [start, end] of patternPieces(text)) expect([start, pieceEnd(text, start)]).toEqual([start, end]);
      }),
      { numRuns: 5000 },
    );
  });

  it('leaves to the pattern exactly the pieces that a character outside ASCII bears on, and finds the rest', () => {
    let [leftToPattern, foundByHand] = [0, 0];
    fc.assert(
      fc.property(mixed, (text) => {
        const codes = asciiCodes(text);
        for (const [start, end] of patternPieces(text)) {
          const found = codes ? o200kAsciiPieceEnd(codes, start, text.length) : -1;
          if (found === -1) leftToPattern++;
          else {
            foundByHand++;
            expect([start, found]).toEqual([start, end]);
          }
          // Nor is a piece whose ending is told by ASCII alone: the piece, and what follows it up to
          // the first character that is not whitespace (whitespace before a word may end one short).
          const next = text.slice(end).search(/\S/);
          if (codes && /^[\x00-\x7f]*$/.test(text.slice(start, next < 0 ? text.length : end + next + 1))) expect(found).toBe(end);
        }
      }),
      { numRuns: 5000 },
    );
    expect(leftToPattern).toBeGreaterThan(1000);
    expect(foundByHand).toBeGreaterThan(leftToPattern);
  });

  it('splits a prompt into the pieces tiktoken merges on their own', () => {
    const text = "Hello, I'm here!\n\n  def f(x):\n    return x/2  // 12345";
    const pieces: string[] = [];
    for (let at = 0; at < text.length; ) {
      const end = pieceEnd(text, at);
      pieces.push(text.slice(at, end));
      at = end;
    }
    expect(pieces).toEqual(['Hello', ',', " I'm", ' here', '!\n\n', ' ', ' def', ' f', '(x', '):\n', '   ', ' return', ' x', '/', '2', ' ', ' //', ' ', '123', '45']);
    expect(pieces).toEqual(patternPieces(text).map(([s, e]) => text.slice(s, e)));
  });
});
