/**
 * Bounded label values for a per-tenant metric: the `size` keys seen most often in this process
 * keep their own value, every other one is `other`. Counts are kept for at most `tracked` keys
 * (beyond, the least seen half is forgotten), so neither the series nor the memory grow with the
 * number of tenants.
 */
export class TopLabels {
  private readonly counts = new Map<string, number>();
  private top = new Set<string>();

  constructor(
    private readonly size = 10,
    private readonly tracked = 1000,
  ) {}

  /** Counts one occurrence of `key`; its label value now. */
  label(key: string): string {
    const count = (this.counts.get(key) ?? 0) + 1;
    this.counts.set(key, count);
    if (!this.top.has(key)) {
      if (this.top.size < this.size) this.top.add(key);
      else {
        let weakest: string | undefined;
        for (const k of this.top) if (weakest === undefined || (this.counts.get(k) ?? 0) < (this.counts.get(weakest) ?? 0)) weakest = k;
        if (weakest !== undefined && (this.counts.get(weakest) ?? 0) < count) {
          this.top.delete(weakest);
          this.top.add(key);
        }
      }
    }
    if (this.counts.size > this.tracked) this.forget();
    return this.top.has(key) ? key : 'other';
  }

  private forget(): void {
    const kept = [...this.counts].sort((a, b) => b[1] - a[1]).slice(0, this.tracked >> 1);
    this.counts.clear();
    for (const [k, c] of kept) this.counts.set(k, c);
    this.top = new Set([...this.top].filter((k) => this.counts.has(k)));
  }
}
