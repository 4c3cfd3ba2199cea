import { NgramCounts, parseNgramCounts } from './word-ngrams';

const TEXT = 'The lighthouse keeper climbed the stairs. The lighthouse keeper lit the lamp. The ships passed the rocks safely.';

describe('word n-gram counts', () => {
  it('scores held-out text lower once it has learned text like it (the loss a trainer reports falls)', () => {
    const counts = new NgramCounts();
    const before = counts.nll(TEXT);
    counts.learn('The lighthouse keeper climbed the stairs.');
    const some = counts.nll(TEXT);
    counts.learn(TEXT);
    const all = counts.nll(TEXT);
    expect(some).toBeLessThan(before);
    expect(all).toBeLessThan(some);
  });

  it('round-trips through its adapter file and refuses anything else', () => {
    const counts = new NgramCounts();
    counts.learn(TEXT);
    const file = parseNgramCounts(JSON.stringify(counts));
    expect(file.trigram['The lighthouse']).toEqual({ keeper: 2 });
    expect(file.starts.The).toBe(3);
    expect(() => parseNgramCounts('{"format":"other"}')).toThrow(/atelier-word-ngrams-v1/);
    // Learning on from the file gives the same counts as learning on from the original.
    const resumed = NgramCounts.fromJSON(file);
    resumed.learn('The keeper slept.');
    counts.learn('The keeper slept.');
    expect(resumed.toJSON()).toEqual(counts.toJSON());
  });
});
