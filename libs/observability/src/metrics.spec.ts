import { Metrics } from './metrics';

/** How many times the stage was recorded, read from the exposition a Prometheus scrape gets. */
async function recorded(metrics: Metrics, stage: string): Promise<number> {
  const { body } = await metrics.scrape();
  const line = body.split('\n').find((l) => l.startsWith('atelier_stage_duration_seconds_count') && l.includes(`stage="${stage}"`));
  return line ? Number(line.split(' ').pop()) : 0;
}

describe('Metrics.timed', () => {
  const metrics = new Metrics('metrics-spec');

  it('passes the work\'s result through and records the stage once it succeeds', async () => {
    await expect(metrics.timed('spec.ok', () => Promise.resolve(42))).resolves.toBe(42);
    await expect(metrics.timed('spec.ok', async () => 'again')).resolves.toBe('again');
    expect(await recorded(metrics, 'spec.ok')).toBe(2);
  });

  it('passes a failure through without recording the stage, a synchronous throw as a rejection', async () => {
    await expect(metrics.timed('spec.failed', () => Promise.reject(new Error('refused')))).rejects.toThrow('refused');
    const throwing = () => {
      throw new Error('thrown');
    };
    const timing = metrics.timed('spec.failed', throwing);
    expect(timing).toBeInstanceOf(Promise);
    await expect(timing).rejects.toThrow('thrown');
    expect(await recorded(metrics, 'spec.failed')).toBe(0);
  });
});
