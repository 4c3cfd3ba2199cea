import fs from 'node:fs';
import { O200K_TOKEN_SPLIT_REGEX } from 'gpt-tokenizer/encodingParams/constants';
import { buildVocabulary, CompactBpe } from './compact-bpe';
import { o200kAsciiPieceEnd } from './o200k-ascii-split';

let shared: CompactBpe | undefined;

/** The file in gpt-tokenizer that holds the o200k ranks, as JavaScript array literals. */
export function o200kRanksFile(): string {
  return require.resolve('gpt-tokenizer/cjs/bpeRanks/o200k_base');
}

const ESCAPES: Record<string, string> = { n: '\n', r: '\r', t: '\t', b: '\b', f: '\f', v: '\v', '0': '\0' };
const ESCAPE = /\\(?:x([0-9a-fA-F]{2})|u\{([0-9a-fA-F]+)\}|u([0-9a-fA-F]{4})|([\s\S]))/g;
const unescapeJs = (literal: string) =>
  literal.replace(ESCAPE, (_, x?: string, braced?: string, u?: string, c?: string) =>
    x ? String.fromCharCode(parseInt(x, 16)) : braced ? String.fromCodePoint(parseInt(braced, 16)) : u ? String.fromCharCode(parseInt(u, 16)) : (ESCAPES[c as string] ?? (c as string)),
  );

/**
 * The ranks in gpt-tokenizer's data file, read as data rather than run as a module. Importing it,
 * or evaluating it with vm or Function, leaves V8's compilation cache holding the script and its
 * array literals (about 11 MB, 200,000 strings) for the life of the process, marked by every
 * full GC: 11-13 ms a mark-compact against 2 ms without. Read as text, they are garbage once the
 * typed arrays are built. The file is `const c0 = [...]; const c1 = [...]; bpe = c0.concat(...)`,
 * each item a string literal (UTF-8 text) or an array of byte values.
 */
export function parseRanks(source: string): (string | number[])[] {
  const ranks: (string | number[])[] = [];
  const arrays = [...source.matchAll(/^const (c\d+) = \[([\s\S]*?)^\];$/gm)];
  const order = /^const bpe = (c\d+(?:\.concat\(c\d+(?:, c\d+)*\))?);$/m.exec(source)?.[1].match(/c\d+/g);
  if (!arrays.length || order?.join() !== arrays.map((a) => a[1]).join()) throw new Error('gpt-tokenizer o200k data file: unexpected layout');
  for (const [, , body] of arrays)
    for (const item of body.matchAll(/"((?:[^"\\]|\\[\s\S])*)"|\[([\d,\s]*)\]/g))
      ranks.push(item[2] !== undefined ? item[2].split(',').map(Number) : unescapeJs(item[1]));
  return ranks;
}

/**
 * OpenAI's o200k_base encoding (GPT-4o and later) as a CompactBpe, built on first use from
 * gpt-tokenizer's ranks, in about the time gpt-tokenizer takes to load.
 */
export function o200k(): CompactBpe {
  shared ??= new CompactBpe(buildVocabulary(parseRanks(fs.readFileSync(o200kRanksFile(), 'utf8'))), O200K_TOKEN_SPLIT_REGEX, o200kAsciiPieceEnd);
  return shared;
}
