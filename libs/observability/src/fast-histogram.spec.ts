import { Histogram, Registry } from 'prom-client';
import { FastHistogram } from './fast-histogram';

const BUCKETS = [0.0001, 0.001, 0.01, 0.1, 1, 10];

/** The same observations into prom-client's Histogram and into FastHistogram, each in a registry of its own. */
function both<L extends string>(labelNames: L[]) {
  const theirs = new Registry();
  const ours = new Registry();
  for (const r of [theirs, ours]) r.setDefaultLabels({ service: 'gateway' });
  const reference = new Histogram<L>({ name: 'h_seconds', help: 'help text', labelNames, buckets: BUCKETS, registers: [theirs] });
  const fast = new FastHistogram<L>('h_seconds', 'help text', labelNames, BUCKETS, [ours]);
  return {
    observe(labels: Record<L, string>, value: number) {
      reference.observe(labels, value);
      fast.observe(labels, value);
    },
    fast,
    reference,
    theirs,
    ours,
  };
}

/** A small deterministic generator, so a failure can be reproduced. */
function lcg(seed: number) {
  let x = seed;
  return () => (x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
}

describe('FastHistogram', () => {
  it('exposes exactly the text prom-client exposes for the same observations, bucket edges and default labels included', async () => {
    const h = both(['method', 'route', 'status_code']);
    const next = lcg(7);
    const routes = ['/v1/chat/completions', '/api/ai/models/:id', '/health'];
    for (let i = 0; i < 2_000; i++) {
      // A quarter exactly on a bucket bound (it counts in that bucket), some beyond the last.
      const value = i % 4 === 0 ? BUCKETS[i % BUCKETS.length] : next() ** 4 * 20;
      h.observe({ method: i % 3 ? 'POST' : 'GET', route: routes[i % routes.length], status_code: String([200, 402, 500][i % 3]) }, value);
    }
    expect(await h.ours.metrics()).toBe(await h.theirs.metrics());
    // prom-client's JSON also carries `exemplar: null` on every line; exemplars are not used here.
    const withoutExemplars = (metrics: Awaited<ReturnType<Registry['getMetricsAsJSON']>>) =>
      metrics.map((m) => ({ ...m, values: m.values.map((v) => {
        const { exemplar: _, ...rest } = v as typeof v & { exemplar?: unknown };
        return rest;
      }) }));
    expect(await h.ours.getMetricsAsJSON()).toEqual(withoutExemplars(await h.theirs.getMetricsAsJSON()));
  });

  it('times with startTimer, merging the labels given at the start and the end', async () => {
    const h = both(['provider', 'outcome']);
    const end = h.fast.startTimer({ provider: 'local' });
    await new Promise((r) => setTimeout(r, 20));
    const seconds = end({ outcome: 'ok' });
    expect(seconds).toBeGreaterThanOrEqual(0.015);
    const text = await h.ours.metrics();
    expect(text).toContain(`h_seconds_count{service="gateway",provider="local",outcome="ok"} 1`);
    expect(text).toContain(`h_seconds_bucket{le="0.01",service="gateway",provider="local",outcome="ok"} 0`);
    // In the first bucket that holds the time measured (a loaded machine wakes the 20 ms timer late: 111 ms once in a full run).
    const bucket = [0.1, 1, 10].find((le) => seconds <= le);
    expect(text).toContain(`h_seconds_bucket{le="${bucket}",service="gateway",provider="local",outcome="ok"} 1`);
  });

  it('drops a value that is not a finite number instead of throwing on the request path', async () => {
    const h = both(['stage']);
    h.fast.observe({ stage: 'auth' }, Number.NaN);
    h.fast.observe({ stage: 'auth' }, Number.POSITIVE_INFINITY);
    h.fast.observe({ stage: 'auth' }, 0.002);
    expect(await h.ours.metrics()).toContain('h_seconds_count{service="gateway",stage="auth"} 1');
  });

  it('refuses the reserved label name le', () => {
    expect(() => new FastHistogram('x_seconds', 'x', ['le'], BUCKETS, [])).toThrow(/reserved/);
  });
});
