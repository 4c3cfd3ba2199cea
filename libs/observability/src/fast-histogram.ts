import type { Metric, Registry } from 'prom-client';

/** One label set's counts: per bucket (not cumulative), then the sum and count of everything observed. */
interface Series {
  labels: Record<string, string>;
  buckets: Float64Array;
  sum: number;
  count: number;
}

/** A value line in prom-client's shape, so its registry formats it exactly as its own histograms. */
interface ValueLine {
  metricName: string;
  labels: Record<string, string | number>;
  sharedLabels: Record<string, string>;
  value: number;
}

/**
 * A Prometheus histogram that the hot path can afford: the gateway observes several of them per
 * request. prom-client's Histogram, on every observe, validates the label names, sorts them into a
 * hash string and looks the bucket up through a number-to-string key (about 2 us per observe on
 * a slow 2-core machine: 4 % of the gateway's CPU per chat request). Here a label set is found
 * by its values in a Map and the bucket by a scan of a typed array.
 *
 * It registers with a prom-client Registry like any of its metrics (registerMetric calls `get`
 * or `getForPromString`), so the exposition text is the same, default labels included.
 */
export class FastHistogram<L extends string = string> {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly bounds: Float64Array;
  private readonly series = new Map<string, Series>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelNames: readonly L[],
    buckets: readonly number[],
    registers: Registry[],
  ) {
    if (labelNames.includes('le' as L)) throw new Error('le is a reserved label name');
    this.bounds = Float64Array.from([...buckets].sort((a, b) => a - b));
    // The registry's type names prom-client's own classes; of a metric it reads only the name,
    // the type and get/getForPromString, which this class has.
    for (const registry of registers) registry.registerMetric(this as unknown as Metric);
  }

  /** Records one value (seconds). A value that is not a finite number is dropped, never thrown on a request's path. */
  observe(labels: Record<L, string>, value: number): void {
    if (!Number.isFinite(value)) return;
    const series = this.seriesOf(labels);
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]) i++;
    // i === bounds.length: only the +Inf bucket (the count) holds it.
    if (i < bounds.length) series.buckets[i]++;
    series.sum += value;
    series.count++;
  }

  /** Starts timing; the returned function observes the seconds since, with `end` labels added. */
  startTimer(start: Partial<Record<L, string>> = {}): (end?: Partial<Record<L, string>>) => number {
    const started = performance.now();
    return (end = {}) => {
      const seconds = (performance.now() - started) / 1000;
      this.observe({ ...start, ...end } as Record<L, string>, seconds);
      return seconds;
    };
  }

  reset(): void {
    this.series.clear();
  }

  private seriesOf(labels: Record<L, string>): Series {
    const names = this.labelNames;
    // One label (the common case) needs no joined key.
    let key = names.length === 1 ? String(labels[names[0]]) : '';
    if (names.length !== 1) for (const n of names) key += `${labels[n] ?? ''}\u0000`;
    let series = this.series.get(key);
    if (!series) {
      const own: Record<string, string> = {};
      for (const n of names) if (labels[n] !== undefined) own[n] = String(labels[n]);
      series = { labels: own, buckets: new Float64Array(this.bounds.length), sum: 0, count: 0 };
      this.series.set(key, series);
    }
    return series;
  }

  /** For prom-client's registry: bucket lines are cumulative, then +Inf, _sum and _count per label set. */
  async getForPromString(): Promise<{ name: string; help: string; type: 'histogram'; aggregator: 'sum'; values: ValueLine[] }> {
    const values: ValueLine[] = [];
    const bucket = `${this.name}_bucket`;
    for (const s of this.series.values()) {
      let cumulative = 0;
      this.bounds.forEach((le, i) => {
        cumulative += s.buckets[i];
        values.push({ metricName: bucket, labels: { le }, sharedLabels: s.labels, value: cumulative });
      });
      values.push(
        { metricName: bucket, labels: { le: '+Inf' }, sharedLabels: s.labels, value: s.count },
        { metricName: `${this.name}_sum`, labels: {}, sharedLabels: s.labels, value: s.sum },
        { metricName: `${this.name}_count`, labels: {}, sharedLabels: s.labels, value: s.count },
      );
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /** prom-client's JSON shape (getMetricsAsJSON): each line's labels in one object. */
  async get() {
    const metric = await this.getForPromString();
    return {
      ...metric,
      values: metric.values.map(({ metricName, labels, sharedLabels, value }) => ({ metricName, value, labels: { ...labels, ...sharedLabels } })),
    };
  }
}
