import { ModelCatalog, type MediaModelDefinition } from '@atelier/models';
import { multiplyPrice, requestedUsage, usageCost } from './pricing';

const catalog = ModelCatalog.fromDirectory();
const image = catalog.get('local-image') as MediaModelDefinition;
const video = catalog.get('local-video') as MediaModelDefinition;

describe('media pricing', () => {
  it('multiplies decimal prices exactly, rounding up to the micro-credit', () => {
    expect(multiplyPrice('0.01', 3)).toBe('0.03');
    expect(multiplyPrice('0.1', 3)).toBe('0.3'); // 0.1 * 3 in floats is 0.30000000000000004
    expect(multiplyPrice('0.02', 7 / 24)).toBe('0.005834');
    expect(multiplyPrice('12.5', 0)).toBe('0');
  });

  it('bills images per image, and video per output second', () => {
    expect(requestedUsage(image, { prompt: 'x' })).toEqual({ images: 1, videoSeconds: 0 });
    expect(usageCost(image, requestedUsage(image, { prompt: 'x', num_images: 4 }))).toBe('0.04');
    expect(requestedUsage(video, { prompt: 'x', duration: 7 }).videoSeconds).toBe(7);
    expect(requestedUsage(video, { prompt: 'x' }).videoSeconds).toBe(5);
    expect(requestedUsage(video, { multi_prompt: [{ prompt: 'a', duration: 2 }, { prompt: 'b', duration: 3 }] }).videoSeconds).toBe(5);
    expect(requestedUsage(video, { prompt: 'x', num_frames: 48, fps: 24 }).videoSeconds).toBe(2);
    // auto is reserved at the schema's maximum (20 s); the actual seconds are settled afterwards.
    expect(usageCost(video, requestedUsage(video, { prompt: 'x', duration: 'auto' }))).toBe('0.4');
  });
});
