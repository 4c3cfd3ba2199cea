import fs from 'node:fs';
import path from 'node:path';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { countInSlices, MAX_RUN_CHARS, o200k } from '@atelier/bpe';
import { fc } from '@atelier/testing';
import type { ChatMessage, ChatTool } from './chat-types';
import { countPromptTokens, countTextTokens } from './token-count';

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

describe('counting long text a part at a time', () => {
  /** The same rule on the whole text at once: what counting in parts must not change. */
  const whole = (text: string) => countInSlices(text, (piece) => o200k().count(piece));
  const word = fc.oneof(
    fc.constantFrom('the', 'lighthouse', "keeper's", 'HTTP/2', '3.14159', '1,024', '東京', 'привет', '😀', '👩‍💻', '—', '(note)', '{"a":1}', '<|endoftext|>'),
    fc.string({ unit: 'grapheme', maxLength: 10 }),
    fc.string({ maxLength: 10 }),
  );
  const gap = fc.constantFrom(' ', ' ', ' ', '  ', '\n', '\n\n', '\t', ' \n', '');
  /** Texts of more than one part, each counted in parts exactly as whole. */
  const countsAsWhole = (longText: fc.Arbitrary<string>) =>
    fc.assert(
      fc.property(longText, (text) => {
        expect(text.length).toBeGreaterThan(4096);
        expect(countTextTokens(text)).toBe(whole(text));
      }),
      // Shrinking texts this long would take minutes; the first failing text is report enough.
      { numRuns: 60, endOnFailure: true },
    );

  it('gives exactly the count of the whole text, whatever sits around the whitespace it is cut at', () => {
    countsAsWhole(fc.array(fc.tuple(word, gap), { minLength: 1500, maxLength: 4000 }).map((parts) => parts.flat().join('')));
  });

  it('gives exactly the count of the whole text when it has no space to cut at (quoted CSV, logs, JSON lines)', () => {
    const spaceless = word.map((w) => w.replace(/[ \t]/g, ''));
    const separator = fc.constantFrom('', ',', ';', '"', '","', "'", '/', '.', ':', '-', '(', ')', '\u0301');
    // Every line ends in punctuation, so no line break follows a letter or digit either.
    const lineBreak = fc.constantFrom('"\n', ';\r\n', '.\n\n', ')\n/', ',\n', '"\n ', "'\n", '\u0301\n');
    // Lines short enough that no run of non-space characters reaches MAX_RUN_CHARS, which countInSlices would count in slices.
    const line = fc.array(fc.tuple(spaceless, separator), { maxLength: 6 }).map((parts) => parts.flat().join('').slice(0, MAX_RUN_CHARS - 8));
    countsAsWhole(fc.array(fc.tuple(line, lineBreak), { minLength: 700, maxLength: 1500 }).map((parts) => parts.flat().join('')));
  });

  it("does not cut a contraction off its word where nothing else could be cut (\"it's\" is one token)", () => {
    // ";\n/" offers no cut at all: the first place to cut after 4,096 characters is in the word.
    const text = `${';\n/'.repeat(1366)}it's${';\n/'.repeat(10)}`;
    expect(countTextTokens(text)).toBe(whole(text));
    expect(countTextTokens(text)).toBe(countTokens(text));
  });

  it('counts real documents (prose, tables, code) exactly as counting them whole', () => {
    const root = path.resolve(__dirname, '../../..');
    const doc = ['README.md', 'docs/api.md', 'docs/benchmarks.md', 'libs/chat/README.md', 'libs/chat/src/chat-request.ts'].map((f) => fs.readFileSync(path.join(root, f), 'utf8')).join('\n');
    expect(doc.length).toBeGreaterThan(20_000);
    expect(countTextTokens(doc)).toBe(whole(doc));
  });

  it('stops soon after the bound instead of counting 1 MiB to its end', () => {
    const texts = { prose: PROSE.repeat(Math.ceil((1 << 20) / PROSE.length)), cjk: '中文字符'.repeat(1 << 18), letters: 'A'.repeat(1 << 20), numbers: '12 '.repeat(1 << 18), csv: `id,name,score\n${'7,alpha,0.5\n'.repeat(1 << 17)}`, quotedCsv: `"id","name"\n${'"7","alpha"\n'.repeat(1 << 17)}`, jsonLines: '{"id":7,"tags":["a"]}\n'.repeat(1 << 16) };
    for (const [name, text] of Object.entries(texts)) {
      const full = countTextTokens(text);
      const bounded = countTextTokens(text, 8192);
      // Past the bound, by at most one part's worth (4,096 characters): the rest was never counted.
      expect({ name, full: full > 100_000, past: bounded > 8192, soon: bounded <= 8192 + 4200 }).toEqual({ name, full: true, past: true, soon: true });
    }
  });

  it('counts a prompt exactly while it fits the bound, and stops across messages once it does not', () => {
    const msg = (content: string): ChatMessage => ({ role: 'user', content });
    const fits = [msg(PROSE.repeat(20)), msg(PROSE.repeat(30))];
    expect(countPromptTokens(fits, [], 8192)).toBe(countPromptTokens(fits));
    const over = [msg(PROSE.repeat(400)), msg(PROSE.repeat(400)), msg(PROSE.repeat(400))];
    const full = countPromptTokens(over);
    const bounded = countPromptTokens(over, [], 8192);
    expect(full).toBeGreaterThan(3 * 8192);
    expect(bounded).toBeGreaterThan(8192);
    expect(bounded).toBeLessThan(2 * 8192);
  });

  it('stops inside tool call arguments and tool definitions too', () => {
    const huge = JSON.stringify({ text: PROSE.repeat(3000) });
    const calls: ChatMessage = { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'save', arguments: huge } }] };
    expect(countPromptTokens([calls])).toBeGreaterThan(100_000);
    expect(countPromptTokens([calls], [], 8192)).toBeLessThan(8192 + 4200);
    const tools: ChatTool[] = [{ type: 'function', function: { name: 'save', description: PROSE.repeat(3000) } }];
    expect(countPromptTokens([], tools)).toBeGreaterThan(100_000);
    expect(countPromptTokens([], tools, 8192)).toBeLessThan(8192 + 4200);
  });
});
