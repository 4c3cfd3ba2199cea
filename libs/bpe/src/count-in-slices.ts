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

/**
 * Calls `each` with [start, end) of each maximal run of more than MAX_RUN_CHARS non-space (or
 * space) characters (UTF-16 units), in order, until it returns true. Such a run holds one of every
 * MAX_RUN_CHARS + 1 consecutive positions, so only the runs through those positions are read, out
 * to their ends: in prose, a few characters of every 129. Reading every character (in a loop over
 * the text's bytes) cost the gateway 336k instructions of a request with an 8,000-character
 * prompt, 42 a character, and as a generator 965k; a pattern for the start of such a run
 * (`\S{129}|\s{129}`) was tried again at every character, and took as long as the tokenizer; an
 * open-ended one (`\S{129,}`) keeps a backtracking entry per character, and a 10 MiB prompt
 * overflowed it.
 */
function eachLongRun(text: string, each: (start: number, end: number) => boolean): void {
  const step = MAX_RUN_CHARS + 1;
  // The end of the last run read: the next run starts there at the earliest.
  let readTo = 0;
  for (let at = step - 1; at < text.length; at += step) {
    if (at < readTo) continue;
    const space = isSpace(text.charCodeAt(at));
    let start = at;
    while (start > readTo && isSpace(text.charCodeAt(start - 1)) === space) start--;
    let end = at + 1;
    while (end < text.length && isSpace(text.charCodeAt(end)) === space) end++;
    readTo = end;
    if (end - start > MAX_RUN_CHARS && each(start, end)) return;
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
