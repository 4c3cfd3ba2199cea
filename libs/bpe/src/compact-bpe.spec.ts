import fs from 'node:fs';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { countTokens, decode, encode } from 'gpt-tokenizer/encoding/o200k_base';
import { fc } from '@atelier/testing';
import { buildVocabulary, CompactBpe } from './compact-bpe';
import { o200k, o200kRanksFile, parseRanks } from './o200k';

// gpt-tokenizer is the reference: the same o200k ranks, special tokens read as plain text.
const plain = { disallowedSpecial: new Set<string>() };
const reference = { count: (t: string) => countTokens(t, plain), encode: (t: string) => encode(t, plain) };

/** Text of the kinds prompts hold: words in several scripts, digits, code, emoji, odd whitespace. */
const fragment = fc.oneof(
  fc.constantFrom('hello', ' world', "don't", " it's", 'HTTP', 'JSONParser', 'naïve', 'Straße', ' über', '東京', 'こんにちは', '한국어', 'مرحبا', 'привет', 'ελληνικά'),
  fc.constantFrom('123', '4567890', '3.14159', '  ', '\n', '\r\n', '\t', '\n\n\n', ' \n ', '   x', '<|endoftext|>', '<|im_start|>', '```ts\n', '=>', '{"a":[1,2]}', '//', '...'),
  fc.constantFrom('😀', '👩‍💻', '🇫🇷', '\u0301', '\ud800', '\udfff', '\u200b', '\u00a0'),
  fc.string({ unit: 'grapheme', maxLength: 8 }),
  fc.string({ unit: 'binary', maxLength: 6 }),
  fc.string({ maxLength: 12 }),
);
/** A word of letters only, different for each number: a piece of its own that no vocabulary holds whole. */
const lettersOf = (i: number) => i.toString(26).replace(/[0-9]/g, (d) => 'qrstuvwxyz'[Number(d)]);

// Without U+FEFF, where gpt-tokenizer is wrong (see the last test of this block).
const text = fc.array(fragment, { maxLength: 30 }).map((parts) => parts.join('').replaceAll('\ufeff', ''));

describe('CompactBpe (o200k) against gpt-tokenizer', () => {
  const bpe = o200k();

  it("reads gpt-tokenizer's data file as exactly the ranks that the module exports", () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const loaded = (require(o200kRanksFile()) as { default: (string | number[])[] }).default;
    const parsed = parseRanks(fs.readFileSync(o200kRanksFile(), 'utf8'));
    expect(parsed.length).toBe(loaded.length);
    expect(parsed.length).toBeGreaterThan(199_000);
    expect(parsed).toEqual(loaded);
  });

  it('encodes and counts generated text exactly as gpt-tokenizer does', () => {
    fc.assert(
      fc.property(text, (t) => {
        const tokens = bpe.encode(t);
        expect(tokens).toEqual(reference.encode(t));
        expect(bpe.count(t)).toBe(tokens.length);
      }),
      { numRuns: 3000 },
    );
  });

  it('encodes real documents exactly as gpt-tokenizer does (this repository: prose, code, JSON)', () => {
    const root = path.resolve(__dirname, '../../..');
    const files = ['README.md', 'docs/api.md', 'docs/benchmarks.md', 'libs/bpe/src/compact-bpe.ts', 'package.json', 'libs/models/README.md'];
    let tokens = 0;
    for (const file of files) {
      const doc = fs.readFileSync(path.join(root, file), 'utf8');
      const ours = bpe.encode(doc);
      expect(ours).toEqual(reference.encode(doc));
      tokens += ours.length;
    }
    expect(tokens).toBeGreaterThan(10_000);
  });

  it('decodes what it encodes, and what gpt-tokenizer encodes, back to the text', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.string({ unit: 'grapheme', maxLength: 10 }), fc.constantFrom(' the', '\n', '東京', '🙂')), { maxLength: 20 }), (parts) => {
        const t = parts.join('');
        expect(bpe.decode(bpe.encode(t))).toBe(t);
        expect(bpe.decode(encode(t, plain))).toBe(decode(encode(t, plain)));
      }),
      { numRuns: 500 },
    );
  });

  it('decodes a byte-order mark as text, and leaves out a character that a cut token list ends inside', () => {
    expect(bpe.decode(bpe.encode('\ufeffhi'))).toBe('\ufeffhi');
    const split = ['🫠', '𓀀', '𝔘'].find((c) => bpe.encode(c).length > 1) as string;
    const tokens = bpe.encode(`ok ${split}`);
    expect(bpe.decode(tokens.slice(0, -1))).toBe('ok ');
    expect(decode(encode(`ok ${split}`, plain).slice(0, -1))).toBe('ok ');
  });

  it('reads special-token text as plain text instead of failing on it', () => {
    expect(() => countTokens('a <|endoftext|> b')).toThrow(/Disallowed special token/);
    expect(bpe.count('a <|endoftext|> b')).toBe(reference.count('a <|endoftext|> b'));
    expect(bpe.count('a <|endoftext|> b')).toBeGreaterThan(3);
  });

  it('gives a piece that merges the same tokens the first time, from memory, and after its memory was cleared', () => {
    const run = (i: number) => `${'東京タワー'.repeat(6)}${i}xyz${'ab'.repeat(10)} zq${lettersOf(i)}vx`;
    const first = bpe.encode(run(0));
    expect(first).toEqual(reference.encode(run(0)));
    expect(bpe.encode(run(0))).toEqual(first);
    expect(bpe.count(run(0))).toBe(first.length);
    // More distinct pieces that merge than there are places to keep them (8,192), then the first again.
    for (let i = 1; i < 9_000; i++) expect(bpe.count(run(i))).toBe(reference.count(run(i)));
    expect(bpe.encode(run(0))).toEqual(first);
    // Counted first (a count keeps no tokens), then encoded.
    expect(bpe.count(run(9_001))).toBe(reference.count(run(9_001)));
    expect(bpe.encode(run(9_001))).toEqual(reference.encode(run(9_001)));
    expect(bpe.encode(run(9_001))).toEqual(reference.encode(run(9_001)));
  });

  it('keeps none of the text it counted alive: what it remembers of a piece is a copy', () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < 16; i++) {
      // A long piece that merges (kept in a Map, by a key), unique to each text, in 512 KiB of prose,
      // flat as JSON.parse leaves a request's strings.
      const text = JSON.parse(JSON.stringify(`zq${lettersOf(i)}vx${'qj'.repeat(40)} ${'lorem ipsum dolor sit amet '.repeat(20_000)}`)) as string;
      bpe.count(text);
    }
    gc();
    // A slice of each text kept as the piece's key would keep 16 texts of 512 KiB alive.
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(4 * 2 ** 20);
  });

  it('reads a byte-order mark as the one token tiktoken has for it', () => {
    // Rank 5574 is the bytes EF BB BF. gpt-tokenizer looks byte sequences up through a TextDecoder,
    // which drops a leading BOM, so it misses that token and splits the mark in two.
    expect(bpe.encode('\ufeff')).toEqual([5574]);
    expect(reference.encode('\ufeff')).toEqual([5416, 123]);
  });
});

describe('CompactBpe on a vocabulary small enough to work out by hand', () => {
  // Ranks are merge order: "a"+"b" merges before "b"+"c", so "abc" is ab|c, never a|bc.
  const ranks = ['a', 'b', 'c', 'ab', 'bc', 'abc', [0xff]];
  const bpe = new CompactBpe(buildVocabulary(ranks), /\S+|\s+/gu);

  it('merges the lowest-ranked pair first, leftmost on a tie', () => {
    expect(bpe.encode('abc')).toEqual([5]);
    expect(bpe.encode('cab')).toEqual([2, 3]);
    expect(bpe.encode('bcab')).toEqual([4, 3]);
    expect(bpe.encode('aaa')).toEqual([0, 0, 0]);
  });

  it('takes a whole piece that is itself a token without merging', () => {
    expect(bpe.count('abc')).toBe(1);
  });

  it('holds raw byte tokens that are not UTF-8', () => {
    expect(bpe.decode([6])).toBe('\ufffd');
  });

  it('splits the same text the same way on every call, and leaves the pattern it was given alone', () => {
    const pattern = /\S+|\s+/gu;
    const own = new CompactBpe(buildVocabulary(ranks), pattern);
    pattern.lastIndex = 2;
    expect(own.encode('abcab')).toEqual([5, 3]);
    expect(own.encode('abcab')).toEqual([5, 3]);
    expect(own.count('abc abc')).toBe(own.count('abc') * 2 + own.count(' '));
    expect(pattern.lastIndex).toBe(2);
  });

  it('steps over the text a pre-tokenizer that can match nothing leaves between its pieces', () => {
    const letters = new CompactBpe(buildVocabulary(ranks), /[abc]*/gu);
    expect(letters.encode('ab  c')).toEqual([3, 2]);
    expect(letters.encode('ab😀c')).toEqual([3, 2]);
  });
});
