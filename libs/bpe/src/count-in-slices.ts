/**
 * BPE tokenizers written in JavaScript (gpt-tokenizer) are quadratic in the length of one pre-tokenized piece, and a run without
 * whitespace (or of whitespace only, or CJK text, which has no spaces) is one piece: 64 KiB of
 * "A" took 2 s, 64 KiB of CJK 19 s, all of it blocking the event loop. Runs longer than this are
 * counted in slices of it, which keeps the count linear in the input. Ordinary text has no such
 * runs and is counted exactly; a long run's count may differ by about one token per slice, well
 * inside what a reservation estimate allows.
 */
export const MAX_RUN_CHARS = 128;
const LONG_RUN = /\S{129,}|\s{129,}/g;

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
  for (const match of text.matchAll(LONG_RUN)) {
    if (match.index > last) total += count(text.slice(last, match.index));
    for (let start = 0, run = match[0]; start < run.length && total <= stopAbove; ) {
      let end = Math.min(start + MAX_RUN_CHARS, run.length);
      // Never cut a surrogate pair: half an emoji would count as an unknown byte sequence.
      const code = run.charCodeAt(end - 1);
      if (end < run.length && code >= 0xd800 && code <= 0xdbff) end--;
      total += count(run.slice(start, end));
      start = end;
    }
    last = match.index + match[0].length;
    if (total > stopAbove) return total;
  }
  if (last < text.length) total += count(last === 0 ? text : text.slice(last));
  return total;
}
