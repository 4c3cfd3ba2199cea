import { runPeriodically } from './periodic-task';

describe('runPeriodically', () => {
  it('never overlaps a slow run, reports failures and keeps going, and stop() waits for the run in flight', async () => {
    let active = 0;
    let most = 0;
    let runs = 0;
    let finished = 0;
    const errors: string[] = [];
    const task = async () => {
      runs++;
      active++;
      most = Math.max(most, active);
      await new Promise((r) => setTimeout(r, 40));
      active--;
      finished++;
      if (runs === 1) throw new Error('first run fails');
    };
    const periodic = runPeriodically(5, task, (err) => errors.push(err.message));
    await new Promise((r) => setTimeout(r, 150));
    await periodic.stop();
    const stoppedAt = finished;
    expect(most).toBe(1);
    expect(runs).toBeGreaterThanOrEqual(2);
    expect(errors).toEqual(['first run fails']);
    // Nothing was cut short, and nothing starts after stop().
    expect(finished).toBe(runs);
    await new Promise((r) => setTimeout(r, 30));
    expect(finished).toBe(stoppedAt);
  });
});
