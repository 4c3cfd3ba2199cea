import { asciiCodes } from './compact-bpe';

/**
 * BPE tokenizers written in JavaScript (gpt-tokenizer) are quadratic in the length of one pre-tokenized piece, and a run without
 * whitespace (or of whitespace only, or CJK text, which has no spaces) is one piece: 64 KiB of
 * "A" took 2 s, 64 KiB of CJK 19 s, all of it blocking the event loop. Runs longer than this are
 * counted in slices of it, which keeps the count linear in the input. Ordinary text has no such
 * runs and is counted exactly; a long run's count may differ by about one token per slice, well
 * inside what a reservation estimate allows.
 */
export const MAX_RUN_CHARS = 128;
/** JavaScript's \s below U+0080: tab, line feed, vertical tab, form feed, carriage return, space. */
const ASCII_SPACE = new Uint8Array(128);
for (const c of [0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x20]) ASCII_SPACE[c] = 1;

/** Whether a UTF-16 unit is in JavaScript's \s. */
const isSpace = (c: number) =>
  c < 0x80
    ? ASCII_SPACE[c] === 1
    : c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff;

/** Texts are read this many characters at a time, so that their asciiCodes need little memory. */
const WINDOW_CHARS = 16_384;
/** Scratch space for a window's asciiCodes; taken by the scan that uses it (a counter could count in slices too). */
let spareCodes: Uint8Array | undefined = new Uint8Array(3 * WINDOW_CHARS + 1);

/**
 * Calls `each` with [start, end) of each maximal run of more than MAX_RUN_CHARS non-space (or
 * space) characters (UTF-16 units), in order, until it returns true. One pass over the text's
 * asciiCodes, a window at a time: a pattern for the start of such a run (`\S{129}|\s{129}`) was
 * tried again at every character, and took as long as the tokenizer (1.0 against 0.9 ms for 20,000
 * characters of this README); an open-ended one (`\S{129,}`) keeps a backtracking entry per
 * character, and a 10 MiB prompt overflowed it. A plain loop, not a generator: as a generator
 * this scan cost the gateway 965k instructions of a request with an 8,000-character prompt (120 a
 * character), more than the tokenizer's own scan.
 */
function eachLongRun(text: string, each: (start: number, end: number) => boolean): void {
  const scratch = spareCodes ?? new Uint8Array(3 * WINDOW_CHARS + 1);
  spareCodes = undefined;
  try {
    let runStart = 0;
    let inSpace = false;
    for (let from = 0; from < text.length; from += WINDOW_CHARS) {
      const window = text.length <= WINDOW_CHARS ? text : text.slice(from, from + WINDOW_CHARS);
      // Undefined for text mostly outside ASCII, read a character at a time.
      const codes = asciiCodes(window, scratch);
      for (let j = 0; j < window.length; j++) {
        // 0x80: a character outside ASCII, or any character of such text, is read from the string.
        const c = codes ? codes[j] : 0x80;
        const space = c < 0x80 ? ASCII_SPACE[c] === 1 : isSpace(window.charCodeAt(j));
        if (space === inSpace) continue;
        const at = from + j;
        if (at - runStart > MAX_RUN_CHARS && each(runStart, at)) return;
        runStart = at;
        inSpace = space;
      }
    }
    if (text.length - runStart > MAX_RUN_CHARS) each(runStart, text.length);
  } finally {
    spareCodes = scratch;
  }
}

/**
 * Any BPE counter made linear: long runs are counted in slices of MAX_RUN_CHARS (chat prompts,
 * fine-tune datasets). With `stopAbove`, counting ends as soon as the total passes it (a
 * prompt already too long for the model need not be counted to its end), and the total
 * returned is then only known to exceed `stopAbove`.
 */
export function countInSlices(text: string, count: (piece: string) => number, stopAbove = Infinity): number {
  if (text.length <= MAX_RUN_CHARS) return text.length === 0 ? 0 : count(text);
  let total = 0;
  let last = 0;
  eachLongRun(text, (runStart, runEnd) => {
    if (runStart > last) total += count(text.slice(last, runStart));
    for (let start = runStart; start < runEnd && total <= stopAbove; ) {
      let end = Math.min(start + MAX_RUN_CHARS, runEnd);
      // Never cut a surrogate pair: half an emoji would count as an unknown byte sequence.
      const code = text.charCodeAt(end - 1);
      if (end < runEnd && code >= 0xd800 && code <= 0xdbff) end--;
      total += count(text.slice(start, end));
      start = end;
    }
    last = runEnd;
    return total > stopAbove;
  });
  if (total > stopAbove) return total;
  if (last < text.length) total += count(last === 0 ? text : text.slice(last));
  return total;
}
