/**
 * BPE tokenizers written in JavaScript (gpt-tokenizer) are quadratic in the length of one pre-tokenized piece, and a run without
 * whitespace (or of whitespace only, or CJK text, which has no spaces) is one piece: 64 KiB of
 * "A" took 2 s, 64 KiB of CJK 19 s, all of it blocking the event loop. Runs longer than this are
 * counted in slices of it, which keeps the count linear in the input. Ordinary text has no such
 * runs and is counted exactly; a long run's count may differ by about one token per slice, well
 * inside what a reservation estimate allows.
 */
export const MAX_RUN_CHARS = 128;
/**
 * Where a long run starts. Not `\S{129,}`: V8's regexp engine keeps a backtracking entry per
 * character of an open-ended repeat, and a run of a few million characters (a 10 MiB prompt,
 * under the 32 MiB body limit) overflowed it: "Maximum call stack size exceeded", a 500. A fixed
 * count finds the start; the run ends at the next character of the other kind.
 */
const LONG_RUN_START = /\S{129}|\s{129}/g;
const NEXT_SPACE = /\s/g;
const NEXT_NON_SPACE = /\S/g;
const SPACE = /\s/;

/** [start, end) of each maximal run of more than MAX_RUN_CHARS non-space (or space) characters. */
function* longRuns(text: string): Generator<[number, number]> {
  LONG_RUN_START.lastIndex = 0;
  for (let found = LONG_RUN_START.exec(text); found; found = LONG_RUN_START.exec(text)) {
    const next = SPACE.test(found[0][0]) ? NEXT_NON_SPACE : NEXT_SPACE;
    next.lastIndex = found.index + found[0].length;
    const end = next.exec(text)?.index ?? text.length;
    LONG_RUN_START.lastIndex = end;
    yield [found.index, end];
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
  for (const [runStart, runEnd] of longRuns(text)) {
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
    if (total > stopAbove) return total;
  }
  if (last < text.length) total += count(last === 0 ? text : text.slice(last));
  return total;
}
