/**
 * o200k's pre-tokenizer (O200K_TOKEN_SPLIT_REGEX) for ASCII text, by hand. Prompts are mostly
 * ASCII (English, code, JSON), and on prose the pattern's Unicode classes cost V8's regexp engine
 * about as much as all the rest of counting a prompt's tokens, which the gateway does before it
 * can reserve credits for the request (1.9 of 4.2 ms for 20,000 characters of this README, on a
 * slow 2-vCPU VM). The pattern, alternatives tried in order at each position:
 *
 *   1. [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+('s|'t|'re|'ve|'m|'ll|'d)?
 *   2. [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*('s|...)?
 *   3. \p{N}{1,3}
 *   4. ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
 *   5. \s*[\r\n]+
 *   6. \s+(?!\S)
 *   7. \s+
 *
 * (contractions in either case). In ASCII the classes are plain: Lu is A-Z, Ll is a-z, the others
 * are empty, \p{N} is 0-9 and \s is tab, line feed, vertical tab, form feed, carriage return and
 * space. A piece that depends on a character outside ASCII (which may be a letter, a digit or a
 * space) is left to the pattern: the pattern's match at a position depends only on the text from
 * there on, so the two can take turns piece by piece (o200k-ascii-split.spec holds them equal).
 *
 * It reads the text as bytes, each character below U+0080 as itself and every other one as 0x80
 * (asciiCodes: for ASCII text, its UTF-8, which TextEncoder writes at memory speed), so that the
 * scan is array reads whatever the string's representation (a slice of a prompt, a flat string).
 */

import { ASCII_CODES_END } from './compact-bpe';

/** Each ASCII character has one class; a line break is whitespace too. */
const UPPER = 1;
const LOWER = 2;
const DIGIT = 4;
const SPACE = 8;
const LINE_BREAK = 16;
/** [^\s\p{L}\p{N}] in ASCII: punctuation, symbols and control characters. */
const SYMBOL = 32;
const LETTER = UPPER | LOWER;
/** Past the end of the text: no class, so every run stops there. */
const END = 0;
/** A character outside ASCII, which may be a letter, a digit or a space: the piece is the pattern's to find. */
const OUTSIDE = 64;
/** asciiCodes' mark after the text, copied: compiled to CommonJS, every read of an import calls a getter. */
const TEXT_END = ASCII_CODES_END;

/**
 * By code: below 0x80 the character's class, at ASCII_CODES_END (after the text) END, else
 * OUTSIDE. Runs stop at the end by their class, so no loop tests its index against the length
 * (those tests made the scan a third slower).
 */
const CLASS = new Uint8Array(256).fill(OUTSIDE);
CLASS.fill(SYMBOL, 0, 128);
CLASS.fill(UPPER, 0x41, 0x5b);
CLASS.fill(LOWER, 0x61, 0x7b);
CLASS.fill(DIGIT, 0x30, 0x3a);
for (const c of [0x09, 0x0b, 0x0c, 0x20]) CLASS[c] = SPACE;
for (const c of [0x0a, 0x0d]) CLASS[c] = SPACE | LINE_BREAK;
CLASS[TEXT_END] = END;

/** After a word (alternatives 1 and 2): its contraction's end, or `at` when none follows. */
function contractionEnd(codes: Uint8Array, at: number): number {
  if (codes[at] !== 0x27) return at;
  // Lower-cased: TEXT_END stays itself, and nothing after it is read.
  const first = codes[at + 1] | 0x20;
  if (first === 0x73 || first === 0x74 || first === 0x64 || first === 0x6d) return at + 2; // 's 't 'd 'm
  const second = first === TEXT_END ? 0 : codes[at + 2] | 0x20;
  if ((first === 0x6c && second === 0x6c) || (first === 0x76 && second === 0x65) || (first === 0x72 && second === 0x65)) return at + 3; // 'll 've 're
  return at;
}

/**
 * The end of the piece O200K_TOKEN_SPLIT_REGEX finds at `start` (a piece boundary, below
 * `length`) in the text whose asciiCodes these are (ASCII_CODES_END at `length`), or -1 when a
 * character outside ASCII bears on it.
 */
export function o200kAsciiPieceEnd(codes: Uint8Array, start: number, length: number): number {
  const first = CLASS[codes[start]];
  if (first === OUTSIDE) return -1;
  // 1 and 2: letters, after at most one character that is neither a line break, a letter nor a digit.
  if ((first & (LINE_BREAK | DIGIT)) === 0) {
    const lettersFrom = first & LETTER ? start : start + 1;
    let at = lettersFrom;
    let cls = CLASS[codes[at]];
    while (cls & UPPER) cls = CLASS[codes[++at]];
    while (cls & LOWER) cls = CLASS[codes[++at]];
    if (cls === OUTSIDE) return -1;
    // Lower-case letters after any upper-case ones (1), or upper-case ones alone (2).
    if (at > lettersFrom) return contractionEnd(codes, at);
  }
  // 3: up to three digits.
  if (first & DIGIT) {
    let at = start + 1;
    for (; at < start + 3; at++) {
      const cls = CLASS[codes[at]];
      if (cls === OUTSIDE) return -1;
      if (!(cls & DIGIT)) break;
    }
    return at;
  }
  // 4: an optional space, symbols, then any line breaks and slashes.
  let at = codes[start] === 0x20 ? start + 1 : start;
  let cls = CLASS[codes[at]];
  if (cls & SYMBOL) {
    while (cls & SYMBOL) cls = CLASS[codes[++at]];
    if (cls === OUTSIDE) return -1;
    for (let c = codes[at]; c === 0x0a || c === 0x0d || c === 0x2f; c = codes[++at]);
    return at;
  }
  if (cls === OUTSIDE) return -1;
  // 5, 6 and 7: whitespace. Up to its last line break (5); else all of it when the text ends there,
  // all of it but its last character when it is longer than one (6), or the one character (7).
  let end = start;
  let afterLineBreak = -1;
  for (cls = first; cls & SPACE; cls = CLASS[codes[++end]]) if (cls & LINE_BREAK) afterLineBreak = end + 1;
  if (cls === OUTSIDE) return -1;
  if (afterLineBreak > 0) return afterLineBreak;
  if (end === length) return end;
  return end - start >= 2 ? end - 1 : start + 1;
}
