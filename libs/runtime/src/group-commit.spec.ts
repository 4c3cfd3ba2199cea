import { GroupCommit } from './group-commit';

describe('GroupCommit', () => {
  it('sends a lone call at once, and calls that arrive meanwhile together in the next batch, each answered with its own result', async () => {
    const batches: number[][] = [];
    const group = new GroupCommit<number, number>(async (inputs) => {
      batches.push(inputs);
      await new Promise((r) => setTimeout(r, 20));
      return inputs.map((n) => n * 10);
    });
    const results = await Promise.all([1, 2, 3, 4, 5].map((n) => group.submit(n)));
    expect(results).toEqual([10, 20, 30, 40, 50]);
    // The first goes alone; the four that came while it was in flight share one batch.
    expect(batches).toEqual([[1], [2, 3, 4, 5]]);
    expect(group.stats).toEqual({ batches: 2, calls: 5 });
  });

  it('retries a failed batch call by call, so only the bad call fails', async () => {
    const group = new GroupCommit<string, string>(async (inputs) => {
      await new Promise((r) => setTimeout(r, 5));
      if (inputs.includes('bad')) throw new Error(`batch of ${inputs.length} refused`);
      return inputs.map((s) => s.toUpperCase());
    });
    const outcomes = await Promise.allSettled(['first', 'a', 'bad', 'b'].map((s) => group.submit(s)));
    expect(outcomes).toEqual([
      { status: 'fulfilled', value: 'FIRST' },
      { status: 'fulfilled', value: 'A' },
      { status: 'rejected', reason: new Error('batch of 1 refused') },
      { status: 'fulfilled', value: 'B' },
    ]);
  });

  it('tells when every call given so far has finished, and says so each time it drains', async () => {
    let idleCalls = 0;
    const release: (() => void)[] = [];
    const group = new GroupCommit<number, number>(
      (inputs) => new Promise((resolve) => release.push(() => resolve(inputs))),
      { onIdle: () => idleCalls++ },
    );
    expect(group.isIdle).toBe(true);
    await group.idle();
    const first = group.submit(1);
    const second = group.submit(2);
    let idle = false;
    const waiting = group.idle().then(() => (idle = true));
    release.shift()!();
    await first;
    await new Promise((r) => setImmediate(r));
    // The second call is still in flight: not idle yet.
    expect(idle).toBe(false);
    expect(group.isIdle).toBe(false);
    release.shift()!();
    await Promise.all([second, waiting]);
    expect(group.isIdle).toBe(true);
    expect(idleCalls).toBe(1);
  });

  describe('with lingerMs', () => {
    const recording = (lingerMs: number, maxBatch?: number) => {
      const batches: number[][] = [];
      const group = new GroupCommit<number, number>(
        async (inputs) => {
          batches.push(inputs);
          return inputs;
        },
        { lingerMs, maxBatch },
      );
      return { group, batches };
    };

    it('holds a lone call back so calls arriving within the window share its batch', async () => {
      const { group, batches } = recording(200);
      const first = group.submit(1);
      await new Promise((r) => setTimeout(r, 20));
      // Still lingering: nothing sent, and not idle (a caller waiting for idle waits for it).
      expect(batches).toEqual([]);
      expect(group.isIdle).toBe(false);
      const second = group.submit(2);
      await expect(Promise.all([first, second])).resolves.toEqual([1, 2]);
      expect(batches).toEqual([[1, 2]]);
    });

    it('sends a lingering call when someone waits for idle, instead of waiting out the window', async () => {
      const { group, batches } = recording(60_000);
      const lingering = group.submit(1);
      await group.idle();
      expect(batches).toEqual([[1]]);
      await expect(lingering).resolves.toBe(1);
    });

    it('sends at once when told to (flushNow), and when a batch is full', async () => {
      const { group, batches } = recording(60_000, 3);
      const flushed = group.submit(1);
      group.flushNow();
      expect(batches).toEqual([[1]]);
      await flushed;
      const full = [2, 3, 4].map((n) => group.submit(n));
      expect(batches).toEqual([[1], [2, 3, 4]]);
      await Promise.all(full);
      // Nothing left lingering, without idle() having to send it.
      expect(group.isIdle).toBe(true);
    });
  });
});
