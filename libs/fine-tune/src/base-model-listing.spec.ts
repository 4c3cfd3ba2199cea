import { baseModelListing } from './base-model-listing';
import { SCRIPT_TYPES, SUPPORTED_BASE_MODELS } from './base-models';
import { parseCreateFineTune } from './fine-tune-request';

describe('baseModelListing', () => {
  const { data } = baseModelListing();

  it('lists every script type once with its supported base models', () => {
    expect(data.map((d) => d.script_type)).toEqual([...SCRIPT_TYPES]);
    for (const d of data) expect(d.base_models).toEqual(SUPPORTED_BASE_MODELS[d.script_type]);
  });

  it('gives each training_params schema its defaults and minimums', () => {
    const text = data.find((d) => d.script_type === 'text_generation')!.training_params_schema as { properties: Record<string, { default?: unknown; minimum?: number }> };
    expect(text.properties.epochs).toMatchObject({ default: 1, minimum: 1 });
    expect(text.properties.learning_rate).toMatchObject({ default: 0.0001 });
  });

  it.each(SCRIPT_TYPES)('gives an example body for %s that passes validation as it is', (scriptType) => {
    const { example } = data.find((d) => d.script_type === scriptType)!;
    expect(parseCreateFineTune(example).problems).toEqual([]);
  });
});
