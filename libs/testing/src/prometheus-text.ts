/**
 * Sums every series of `name` whose labels include `labels` in a Prometheus text exposition
 * (label order does not matter); NaN when no series matches.
 */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  let found = false;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const series = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(labels).every(([k, v]) => series[k] === v)) {
      sum += Number(m[3]);
      found = true;
    }
  }
  return found ? sum : NaN;
}
