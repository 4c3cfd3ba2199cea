interface Waiting<I, R> {
  input: I;
  resolve: (value: R) => void;
  reject: (err: unknown) => void;
}

export interface GroupCommitOptions {
  /** Most calls carried by one batch. */
  maxBatch?: number;
  /** Called each time the last batch in flight finished with nothing left waiting. */
  onIdle?: () => void;
  /**
   * How long a call that finds nothing in flight waits for others to join its batch (0: it goes
   * at once). For calls nobody waits on the latency of, at rates too low for batches to form.
   */
  lingerMs?: number;
}

/**
 * Group commit for calls that each cost a round trip and a commit (a Postgres insert, a Redis
 * script): while one batch is in flight, new calls wait and then go together in the next one, so
 * under load N concurrent calls cost about one round trip each batch instead of N, and alone a
 * call goes at once. A batch that fails is retried call by call, so one bad call fails alone.
 * Each call resolves only after the batch holding it succeeded.
 */
export class GroupCommit<I, R> {
  private waiting: Waiting<I, R>[] = [];
  private running = false;
  private idleWaiters: (() => void)[] = [];
  private readonly maxBatch: number;
  private readonly onIdle?: () => void;
  private readonly lingerMs: number;
  private lingering?: NodeJS.Timeout;
  /** Batches sent and the calls they carried (calls / batches = the batching factor). */
  readonly stats = { batches: 0, calls: 0 };

  constructor(
    private readonly flush: (inputs: I[]) => Promise<R[]>,
    options: GroupCommitOptions = {},
  ) {
    this.maxBatch = options.maxBatch ?? 256;
    this.onIdle = options.onIdle;
    this.lingerMs = options.lingerMs ?? 0;
  }

  submit(input: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.waiting.push({ input, resolve, reject });
      if (this.running) return;
      if (this.lingerMs <= 0 || this.waiting.length >= this.maxBatch) this.flushNow();
      else this.lingering ??= setTimeout(() => this.flushNow(), this.lingerMs);
    });
  }

  /** Sends what is waiting now, without lingering (e.g. before shutting down). */
  flushNow(): void {
    clearTimeout(this.lingering);
    this.lingering = undefined;
    if (!this.running && this.waiting.length > 0) void this.drain();
  }

  /** Whether no call is waiting or in flight. */
  get isIdle(): boolean {
    return !this.running && this.waiting.length === 0;
  }

  /**
   * Resolves once every call submitted so far has finished (at once when idle). Calls still
   * lingering are sent now: whoever waits for them (a shutdown, a caller that needs their effect)
   * has no use for the window.
   */
  idle(): Promise<void> {
    this.flushNow();
    if (this.isIdle) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private async drain(): Promise<void> {
    this.running = true;
    while (this.waiting.length > 0) {
      const batch = this.waiting.splice(0, this.maxBatch);
      this.stats.batches++;
      this.stats.calls += batch.length;
      try {
        const results = await this.flush(batch.map((w) => w.input));
        batch.forEach((w, i) => w.resolve(results[i]));
      } catch (err) {
        if (batch.length === 1) batch[0].reject(err);
        else
          await Promise.all(
            batch.map((w) =>
              this.flush([w.input]).then(
                ([result]) => w.resolve(result),
                (alone: unknown) => w.reject(alone),
              ),
            ),
          );
      }
    }
    this.running = false;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
    this.onIdle?.();
  }
}
