import { providerProgress } from './prediction.engine';

describe('providerProgress', () => {
  it('reads a numeric progress, as a fraction or a percentage', () => {
    expect(providerProgress({ progress: 0.25 })).toBe(0.25);
    expect(providerProgress({ progress: 40 })).toBe(0.4);
  });

  it("reads the last sampler line of a Replicate prediction's logs", () => {
    const logs = 'Using seed: 7\n  0%|          | 0/28 [00:00<?, ?it/s]\n 50%|█████     | 14/28 [00:02<00:02,  6.1it/s]\n';
    expect(providerProgress({ logs })).toBe(0.5);
    expect(providerProgress({ logs: 'loading weights\nprogress 73%' })).toBe(0.73);
  });

  it("reads fal's status logs (a list of messages)", () => {
    expect(providerProgress({ logs: [{ message: 'step 3/12' }, { message: 'step 9/12' }] })).toBe(0.75);
  });

  it('says nothing when the provider does not tell', () => {
    expect(providerProgress({})).toBeUndefined();
    expect(providerProgress({ logs: 'warming up' })).toBeUndefined();
    expect(providerProgress({ logs: 'ratio 3/0' })).toBeUndefined();
  });
});
