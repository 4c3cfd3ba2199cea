/** A variant of an experiment: a model of the namespace and its share of the requests. */
export interface Variant {
  model: string;
  weight: number;
}

/** Feedback on one variant's answers, on the experiment's metric. */
export interface MetricTally {
  count: number;
  sum: number;
  sumSquares: number;
}

export type MetricType = 'boolean' | 'float';

/** The variant whose share of [0, 1) holds `draw` (the weights sum to 1; rounding leaves the last one the rest). */
export function pickVariant(variants: readonly Variant[], draw: number): Variant {
  let edge = 0;
  for (const v of variants) {
    edge += v.weight;
    if (draw < edge) return v;
  }
  return variants.findLast((v) => v.weight > 0) ?? variants[variants.length - 1];
}

/**
 * A draw in [0, 1) fixed by the experiment and the sticky key (FNV-1a), so one user keeps their
 * variant while the weights stand, and only the users at a moved boundary change when they move.
 */
export function stickyDraw(experimentId: string, key: string): number {
  let h = 0x811c9dc5;
  const text = `${experimentId}\u0000${key}`;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  // One more mixing round: FNV's low bits are weak for short keys.
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  h ^= h >>> 12;
  return (h >>> 0) / 2 ** 32;
}

/** A metric's mean with a 95 % interval: Wilson's for a boolean metric, the normal one for a float metric (null under two values). */
export function metricSummary(type: MetricType, t: MetricTally): { count: number; mean: number | null; ci95: [number, number] | null } {
  if (t.count === 0) return { count: 0, mean: null, ci95: null };
  const mean = t.sum / t.count;
  const z = 1.96;
  if (type === 'boolean') {
    const n = t.count;
    const centre = (mean + (z * z) / (2 * n)) / (1 + (z * z) / n);
    const half = (z / (1 + (z * z) / n)) * Math.sqrt((mean * (1 - mean)) / n + (z * z) / (4 * n * n));
    return { count: n, mean, ci95: [round(Math.max(0, centre - half)), round(Math.min(1, centre + half))] };
  }
  if (t.count < 2) return { count: t.count, mean, ci95: null };
  const half = (z * sampleSd(t)) / Math.sqrt(t.count);
  return { count: t.count, mean, ci95: [round(mean - half), round(mean + half)] };
}

/**
 * Adaptive weights (randomized probability matching, as Thompson sampling routes): each variant's
 * share is the probability that it is the best on the metric given the feedback so far, read from
 * 4,000 draws of each variant's posterior, and lifted to at least `minWeight` so that no variant
 * starves. Boolean metrics take a Beta(1 + successes, 1 + failures) posterior; float metrics a
 * normal one around the mean (a variant with no feedback yet gets the pooled mean and spread).
 * The draws are seeded by the tallies, so the same feedback always gives the same weights.
 */
export function adaptiveWeights(variants: readonly Variant[], tallies: readonly MetricTally[], type: MetricType, optimize: 'max' | 'min', minWeight: number): Variant[] {
  const k = variants.length;
  const total = tallies.reduce((a, t) => ({ count: a.count + t.count, sum: a.sum + t.sum, sumSquares: a.sumSquares + t.sumSquares }), { count: 0, sum: 0, sumSquares: 0 });
  if (total.count === 0) return variants.map((v) => ({ ...v }));
  const pooledMean = total.sum / total.count;
  const pooledSd = total.count > 1 ? Math.max(sampleSd(total), 1e-6) : 1;
  const posteriors = tallies.map((t) => {
    if (type === 'boolean') {
      const a = 1 + t.sum;
      const b = 1 + t.count - t.sum;
      return { mean: a / (a + b), sd: Math.sqrt((a * b) / ((a + b) ** 2 * (a + b + 1))) };
    }
    if (t.count === 0) return { mean: pooledMean, sd: pooledSd };
    const sd = t.count > 1 ? Math.max(sampleSd(t), pooledSd / 4) : pooledSd;
    return { mean: t.sum / t.count, sd: sd / Math.sqrt(t.count) };
  });
  const random = mulberry32(seedOf(tallies));
  const wins = new Array<number>(k).fill(0);
  const draws = 4000;
  const sign = optimize === 'max' ? 1 : -1;
  for (let d = 0; d < draws; d++) {
    let best = 0;
    let bestValue = -Infinity;
    for (let i = 0; i < k; i++) {
      const value = sign * (posteriors[i].mean + posteriors[i].sd * gaussian(random));
      if (value > bestValue) {
        bestValue = value;
        best = i;
      }
    }
    wins[best]++;
  }
  const spread = 1 - k * minWeight;
  const weights = wins.map((w) => round(minWeight + spread * (w / draws)));
  // Rounding leaves the sum a hair off 1: the largest share takes the difference.
  const largest = weights.indexOf(Math.max(...weights));
  weights[largest] = round(weights[largest] + 1 - weights.reduce((a, b) => a + b, 0));
  return variants.map((v, i) => ({ model: v.model, weight: weights[i] }));
}

function sampleSd(t: MetricTally): number {
  const mean = t.sum / t.count;
  return Math.sqrt(Math.max(0, (t.sumSquares - t.count * mean * mean) / (t.count - 1)));
}

function round(x: number): number {
  return Math.round(x * 1e4) / 1e4;
}

function seedOf(tallies: readonly MetricTally[]): number {
  let h = 2166136261;
  for (const t of tallies)
    for (const x of [t.count, t.sum, t.sumSquares]) {
      h ^= Math.round(x * 1000) | 0;
      h = Math.imul(h, 16777619);
    }
  return h >>> 0;
}

function mulberry32(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A standard normal draw (Box-Muller). */
function gaussian(random: () => number): number {
  const u = 1 - random();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
}
