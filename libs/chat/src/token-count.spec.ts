import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { MAX_RUN_CHARS } from '@atelier/bpe';
import { countTextTokens } from './token-count';

const PROSE =
  'The lighthouse keeper climbed the spiral stairs at dusk, counting each of the 114 steps as he had done for thirty years. ' +
  'Outside, the sea was grey and restless; gulls wheeled over the rocks (as they always did) and the wind smelled of salt.\n\n';

/** Runs the BPE used to be quadratic on: one long piece each. */
const PATHOLOGICAL: Record<string, string> = {
  letters: 'A',
  spaces: ' ',
  cjk: '中',
  emoji: '😀',
  punctuation: '!',
  newlines: '\n',
};

describe('countTextTokens', () => {
  it('counts ordinary text exactly as the o200k tokenizer does', () => {
    for (const text of [PROSE, PROSE.repeat(50), 'x', 'naïve café — ünïcödé ✓ 😀 中文字符', `${'word '.repeat(2000)}end`])
      expect(countTextTokens(text)).toBe(countTokens(text));
  });

  it('counts long runs within a token per slice of the exact count', () => {
    for (const [name, unit] of Object.entries(PATHOLOGICAL)) {
      const text = `${PROSE}${unit.repeat(4096 / unit.length)}${PROSE}`;
      const exact = countTokens(text);
      const slices = Math.ceil(text.length / MAX_RUN_CHARS);
      expect({ name, diff: Math.abs(countTextTokens(text) - exact) <= slices }).toEqual({ name, diff: true });
    }
  });

  it('never splits a surrogate pair (an emoji run counts like emoji, not unknown bytes)', () => {
    const run = '😀'.repeat(1000);
    expect(countTextTokens(run)).toBeLessThanOrEqual(countTokens('😀') * 1000);
  });

  it('grows linearly on runs that used to take quadratic time', () => {
    // A ratio of two sizes, not a wall-clock bound: 16x the input took 256x the time before.
    const time = (text: string) => {
      const started = performance.now();
      countTextTokens(text);
      return performance.now() - started;
    };
    for (const [name, unit] of Object.entries(PATHOLOGICAL)) {
      const small = unit.repeat(Math.ceil(32_768 / unit.length));
      const large = unit.repeat(Math.ceil(524_288 / unit.length));
      time(small);
      const ratio = time(large) / Math.max(time(small), 1);
      expect({ name, linear: ratio < 64 }).toEqual({ name, linear: true });
    }
  });
});
