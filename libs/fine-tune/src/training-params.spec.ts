import { SCRIPT_TYPES, SUPPORTED_BASE_MODELS, BASE_MODELS } from './base-models';
import { parseCreateFineTune } from './fine-tune-request';
import { TRAINING_PARAMS, validateTrainingParams } from './training-params';

/** A minimal valid params object: every required field with a plausible value. */
function required(scriptType: (typeof SCRIPT_TYPES)[number]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(TRAINING_PARAMS[scriptType]))
    if ('required' in spec && spec.required) out[name] = spec.type === 'string[]' ? ['col_a'] : 'col_a';
  return out;
}

describe('training_params tables', () => {
  it.each(SCRIPT_TYPES)('%s: fills every default and reports every missing required field', (scriptType) => {
    const table = TRAINING_PARAMS[scriptType];
    const { params, problems } = validateTrainingParams(scriptType, required(scriptType));
    expect(problems).toEqual([]);
    for (const [name, spec] of Object.entries(table)) {
      if ('required' in spec && spec.required) continue;
      if ('default' in spec && spec.default !== undefined) expect(params[name]).toEqual(spec.default);
      else expect(params).not.toHaveProperty(name);
    }
    const missing = validateTrainingParams(scriptType, {}).problems;
    const requiredNames = Object.entries(table).filter(([, s]) => 'required' in s && s.required).map(([n]) => `training_params.${n}`);
    expect(missing).toEqual(requiredNames.map((field) => ({ field, message: 'is required' })));
  });

  it.each(SCRIPT_TYPES)('%s: minimums are inclusive', (scriptType) => {
    for (const [name, spec] of Object.entries(TRAINING_PARAMS[scriptType])) {
      if ((spec.type !== 'integer' && spec.type !== 'number') || spec.min === undefined) continue;
      expect(validateTrainingParams(scriptType, { ...required(scriptType), [name]: spec.min }).problems).toEqual([]);
      const below = spec.type === 'integer' ? spec.min - 1 : spec.min - 0.001;
      expect(validateTrainingParams(scriptType, { ...required(scriptType), [name]: below }).problems).toEqual([
        { field: `training_params.${name}`, message: `must be >= ${spec.min}, got ${below}` },
      ]);
    }
  });

  it('uses the spec defaults that differ between script types', () => {
    expect(validateTrainingParams('text_generation', required('text_generation')).params.seq_length).toBe(1024);
    expect(validateTrainingParams('image_to_text', required('image_to_text')).params.seq_length).toBe(4096);
    expect(validateTrainingParams('image_generation', required('image_generation')).params).toMatchObject({ steps: 2000, timestep_type: 'sigmoid' });
    expect(validateTrainingParams('image_editing', required('image_editing')).params).toMatchObject({ steps: 3000, timestep_type: 'weighted', cache_text_embeddings: false });
    for (const t of ['image_editing', 'multi_image_editing', 'image_to_video', 'image_generation'] as const)
      expect(validateTrainingParams(t, required(t)).params.samples).toHaveLength(2);
  });

  it('checks integers, numbers, booleans, enums and sample shapes', () => {
    const { problems } = validateTrainingParams('multi_image_editing', {
      ...required('multi_image_editing'),
      steps: 10.5,
      learning_rate: 'fast',
      use_lora: 1,
      timestep_type: 'cubic',
      samples: [{ prompt: 'ok', ctrl_img_urls: ['ftp://x'] }, 'nope', { ctrl_img_urls: [] }],
    });
    expect(problems).toEqual([
      { field: 'training_params.learning_rate', message: 'must be a number, got string' },
      { field: 'training_params.samples[0].ctrl_img_urls[0]', message: 'must be an http(s) URL' },
      { field: 'training_params.samples[1]', message: 'must be an object with ctrl_img_urls and prompt, got string' },
      { field: 'training_params.samples[2].prompt', message: 'is required' },
      { field: 'training_params.samples[2].ctrl_img_urls', message: 'must be a non-empty array of http(s) URLs' },
      { field: 'training_params.steps', message: 'must be an integer, got 10.5' },
      { field: 'training_params.timestep_type', message: 'must be one of weighted, sigmoid, linear' },
      { field: 'training_params.use_lora', message: 'must be a boolean, got number' },
    ]);
  });

  it('lists every supported base model in the data table, and each script type its own', () => {
    for (const t of SCRIPT_TYPES) for (const m of SUPPORTED_BASE_MODELS[t]) expect(BASE_MODELS).toHaveProperty([m]);
    expect(Object.fromEntries(SCRIPT_TYPES.map((t) => [t, SUPPORTED_BASE_MODELS[t].length]))).toEqual({
      text_generation: 8,
      text_chat_messages: 8,
      image_to_text: 3,
      image_editing: 2,
      multi_image_editing: 2,
      image_to_video: 3,
      image_generation: 5,
    });
  });

  it('parses resource references and refuses path tricks', () => {
    const body = (resource: string) => ({ resource, base_model: 'Qwen/Qwen3-0.6B', script_type: 'text_generation', training_params: required('text_generation') });
    expect(parseCreateFineTune(body('main/data/train.parquet')).request).toMatchObject({ branch: 'main', path: 'data/train.parquet' });
    for (const bad of ['train.parquet', 'main/../x.parquet', 'main//x.parquet', '/main/x.parquet', 'main/x.csv'])
      expect(parseCreateFineTune(body(bad)).problems).toEqual([{ field: 'resource', message: expect.any(String) }]);
  });
});
