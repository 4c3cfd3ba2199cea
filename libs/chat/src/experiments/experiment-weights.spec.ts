import { adaptiveWeights, metricSummary, pickVariant, stickyDraw, type MetricTally } from './experiment-weights';

const tally = (values: number[]): MetricTally => ({ count: values.length, sum: values.reduce((a, b) => a + b, 0), sumSquares: values.reduce((a, b) => a + b * b, 0) });
const two = [
  { model: 'local-chat', weight: 0.5 },
  { model: 'my-tune', weight: 0.5 },
];

describe('pickVariant', () => {
  it('splits [0, 1) by weight', () => {
    const variants = [
      { model: 'a', weight: 0.25 },
      { model: 'b', weight: 0.75 },
    ];
    expect(pickVariant(variants, 0).model).toBe('a');
    expect(pickVariant(variants, 0.2499).model).toBe('a');
    expect(pickVariant(variants, 0.25).model).toBe('b');
    expect(pickVariant(variants, 0.9999).model).toBe('b');
  });

  it('never picks a variant of weight 0 (a promoted experiment)', () => {
    const variants = [
      { model: 'a', weight: 1 },
      { model: 'b', weight: 0 },
    ];
    for (const draw of [0, 0.5, 0.999999]) expect(pickVariant(variants, draw).model).toBe('a');
  });
});

describe('stickyDraw', () => {
  it('gives one key the same draw, and spreads keys evenly', () => {
    expect(stickyDraw('exp-1', 'user-7')).toBe(stickyDraw('exp-1', 'user-7'));
    expect(stickyDraw('exp-1', 'user-7')).not.toBe(stickyDraw('exp-2', 'user-7'));
    const below = Array.from({ length: 4000 }, (_, i) => stickyDraw('exp-1', `user-${i}`)).filter((d) => d < 0.3).length;
    expect(below / 4000).toBeGreaterThan(0.27);
    expect(below / 4000).toBeLessThan(0.33);
  });
});

describe('metricSummary', () => {
  it("gives a boolean metric's share with Wilson's 95 % interval", () => {
    const s = metricSummary('boolean', tally([1, 1, 1, 1, 1, 1, 1, 1, 0, 0]));
    expect(s.mean).toBe(0.8);
    // Wilson's interval for 8 of 10: 0.490 to 0.943.
    expect(s.ci95?.[0]).toBeCloseTo(0.49, 2);
    expect(s.ci95?.[1]).toBeCloseTo(0.943, 2);
  });

  it("gives a float metric's mean with the normal 95 % interval, and none under two values", () => {
    const s = metricSummary('float', tally([2, 4, 4, 4, 5, 5, 7, 9]));
    expect(s.mean).toBe(5);
    // sd 2.138, so 5 +- 1.96 * 2.138 / sqrt(8) = 5 +- 1.482.
    expect(s.ci95?.[0]).toBeCloseTo(3.518, 2);
    expect(s.ci95?.[1]).toBeCloseTo(6.482, 2);
    expect(metricSummary('float', tally([3])).ci95).toBeNull();
    expect(metricSummary('float', tally([])).mean).toBeNull();
  });
});

describe('adaptiveWeights', () => {
  it('keeps the weights until there is feedback', () => {
    expect(adaptiveWeights(two, [tally([]), tally([])], 'boolean', 'max', 0.05)).toEqual(two);
  });

  it('moves weight toward the variant that wins, and leaves the loser its floor', () => {
    const w = adaptiveWeights(two, [tally([0, 0, 1, 0, 0, 0, 1, 0, 0, 0]), tally([1, 1, 1, 0, 1, 1, 1, 1, 1, 1])], 'boolean', 'max', 0.05);
    expect(w[1].weight).toBeGreaterThan(0.9);
    expect(w[0].weight).toBeGreaterThanOrEqual(0.05);
    expect(w[0].weight + w[1].weight).toBeCloseTo(1, 9);
  });

  it('reads optimize: min the other way round', () => {
    const w = adaptiveWeights(two, [tally([120, 130, 110, 125]), tally([300, 310, 290, 305])], 'float', 'min', 0.1);
    expect(w[0].weight).toBeCloseTo(0.9, 3);
    expect(w[1].weight).toBeCloseTo(0.1, 3);
  });

  it('stays near even when the variants are alike, and gives the same weights for the same feedback', () => {
    const tallies = [tally([1, 0, 1, 0, 1, 0]), tally([0, 1, 0, 1, 0, 1])];
    const w = adaptiveWeights(two, tallies, 'boolean', 'max', 0.05);
    expect(Math.abs(w[0].weight - 0.5)).toBeLessThan(0.05);
    expect(adaptiveWeights(two, tallies, 'boolean', 'max', 0.05)).toEqual(w);
  });

  it('splits three ways and sums to 1', () => {
    const three = [...two, { model: 'third', weight: 0 }];
    const w = adaptiveWeights(three, [tally([0.2, 0.3]), tally([0.9, 0.8, 0.85]), tally([])], 'float', 'max', 0.05);
    expect(w.reduce((a, v) => a + v.weight, 0)).toBeCloseTo(1, 9);
    expect(w[1].weight).toBeGreaterThan(w[0].weight);
    for (const v of w) expect(v.weight).toBeGreaterThanOrEqual(0.05);
  });
});
