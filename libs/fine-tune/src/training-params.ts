import type { ScriptType } from './base-models';

/** One problem with a request, reported together with all the others. */
export interface FieldProblem {
  field: string;
  message: string;
}

type SampleShape = 'ctrl_img_url' | 'ctrl_img_urls' | 'prompt';

export type ParamSpec =
  | { type: 'string'; required?: boolean; default?: string; enum?: readonly string[]; column?: boolean }
  | { type: 'string[]'; required?: boolean; default?: readonly string[]; column?: boolean }
  | { type: 'integer'; default?: number; min?: number; max?: number }
  | { type: 'number'; default?: number; min?: number; max?: number }
  | { type: 'boolean'; default?: boolean }
  | { type: 'samples'; shape: SampleShape; default: readonly Record<string, unknown>[] };

/** Most optimizer steps a run may ask for (image types' `steps`), and most steps a trainer may report or checkpoint. */
export const MAX_TRAINING_STEPS = 100_000;
/** Most checkpoints one run may seal (save_steps_ratio >= 0.01 asks for at most 100). */
export const MAX_CHECKPOINTS_PER_RUN = 200;

export const TIMESTEP_TYPES = ['weighted', 'sigmoid', 'linear'] as const;
/** The spec names only the default (`epoch`); the others are the usual trainer save strategies. */
export const SAVE_STRATEGIES = ['epoch', 'steps', 'no'] as const;

const DEFAULT_PROMPTS = [
  'A photo of a red fox sitting in a snowy forest at golden hour',
  'A cozy reading nook with a large window, soft morning light, watercolor style',
] as const;
const DEFAULT_EDIT_PROMPTS = ['Make it look like a watercolor painting', 'Change the background to a sunny beach'] as const;
const DEFAULT_VIDEO_PROMPTS = ['A paper boat drifting down a rain-soaked street, slow camera pan', 'Waves rolling onto a rocky shore at sunset'] as const;

/**
 * Default samples of the editing types have an empty control-image URL: the trainer then uses
 * the control image(s) of the dataset's first and second row.
 */
const samples = {
  edit: DEFAULT_EDIT_PROMPTS.map((prompt) => ({ ctrl_img_url: '', prompt })),
  multiEdit: DEFAULT_EDIT_PROMPTS.map((prompt) => ({ ctrl_img_urls: [] as string[], prompt })),
  video: DEFAULT_VIDEO_PROMPTS.map((prompt) => ({ prompt })),
  image: DEFAULT_PROMPTS.map((prompt) => ({ prompt })),
};

const textCommon = {
  batch_size: { type: 'integer', default: 1, min: 1, max: 256 },
  enable_thinking: { type: 'boolean', default: false },
  // OpenAI's fine-tuning bounds: n_epochs 1-50. Every bound below keeps one cheap run from holding a trainer for days.
  epochs: { type: 'integer', default: 1, min: 1, max: 50 },
  grad_accum: { type: 'integer', default: 1, min: 1, max: 1024 },
  learning_rate: { type: 'number', default: 0.0001, min: 0 },
  logging_steps: { type: 'integer', default: 10, min: 1, max: 100_000 },
  lora_alpha: { type: 'integer', default: 16, min: 1, max: 1024 },
  lora_rank: { type: 'integer', default: 16, min: 1, max: 512 },
  neftune_noise_alpha: { type: 'number', default: 0, min: 0 },
  // A checkpoint every ratio of the run: at least 0.01, so at most 100 checkpoints.
  save_steps_ratio: { type: 'number', default: 0.25, min: 0.01, max: 1 },
  save_strategy: { type: 'string', default: 'epoch', enum: SAVE_STRATEGIES },
  seq_length: { type: 'integer', default: 1024, min: 1, max: 131_072 },
  use_lora: { type: 'boolean', default: true },
} as const satisfies Record<string, ParamSpec>;

const imageCommon = {
  batch_size: { type: 'integer', default: 1, min: 1, max: 256 },
  gradient_accumulation: { type: 'integer', default: 1, min: 1, max: 1024 },
  learning_rate: { type: 'number', default: 0.0002 },
  lora_alpha: { type: 'integer', default: 16, min: 1, max: 1024 },
  lora_rank: { type: 'integer', default: 16, min: 1, max: 512 },
  sample_every: { type: 'integer', default: 200, min: 1, max: MAX_TRAINING_STEPS },
} as const satisfies Record<string, ParamSpec>;

/** The spec's training_params tables, one per script type. */
export const TRAINING_PARAMS: Record<ScriptType, Record<string, ParamSpec>> = {
  text_generation: {
    question_column: { type: 'string', required: true, column: true },
    answer_column: { type: 'string', required: true, column: true },
    ...textCommon,
  },
  text_chat_messages: {
    messages_column: { type: 'string', required: true, column: true },
    ...textCommon,
  },
  image_to_text: {
    question_column: { type: 'string', required: true, column: true },
    answer_column: { type: 'string', required: true, column: true },
    image_columns: { type: 'string[]', required: true, default: [], column: true },
    ...textCommon,
    seq_length: { type: 'integer', default: 4096, min: 1, max: 131_072 },
  },
  image_editing: {
    caption_column: { type: 'string', required: true, default: '', column: true },
    control_image_column: { type: 'string', required: true, default: '', column: true },
    image_column: { type: 'string', required: true, default: '', column: true },
    ...imageCommon,
    cache_text_embeddings: { type: 'boolean', default: false },
    sample_height: { type: 'integer', default: 1024, min: 1, max: 4096 },
    sample_width: { type: 'integer', default: 1024, min: 1, max: 4096 },
    samples: { type: 'samples', shape: 'ctrl_img_url', default: samples.edit },
    steps: { type: 'integer', default: 3000, min: 1, max: MAX_TRAINING_STEPS },
    timestep_type: { type: 'string', default: 'weighted', enum: TIMESTEP_TYPES },
    use_lora: { type: 'boolean', default: true },
  },
  multi_image_editing: {
    caption_column: { type: 'string', required: true, default: '', column: true },
    control_image_columns: { type: 'string[]', required: true, default: [], column: true },
    image_column: { type: 'string', required: true, default: '', column: true },
    ...imageCommon,
    sample_height: { type: 'integer', default: 1024, min: 1, max: 4096 },
    sample_width: { type: 'integer', default: 1024, min: 1, max: 4096 },
    samples: { type: 'samples', shape: 'ctrl_img_urls', default: samples.multiEdit },
    steps: { type: 'integer', default: 3000, min: 1, max: MAX_TRAINING_STEPS },
    timestep_type: { type: 'string', default: 'weighted', enum: TIMESTEP_TYPES },
    use_lora: { type: 'boolean', default: true },
  },
  image_to_video: {
    caption_column: { type: 'string', required: true, column: true },
    image_column: { type: 'string', required: true, column: true },
    ...imageCommon,
    num_frames: { type: 'integer', default: 81, min: 1, max: 1024 },
    samples: { type: 'samples', shape: 'prompt', default: samples.video },
    steps: { type: 'integer', default: 3000, min: 1, max: MAX_TRAINING_STEPS },
    timestep_type: { type: 'string', default: 'weighted', enum: TIMESTEP_TYPES },
    // The spec gives no default: left out unless the request sets it.
    use_lora: { type: 'boolean' },
  },
  image_generation: {
    caption_column: { type: 'string', required: true, default: '', column: true },
    image_column: { type: 'string', required: true, default: '', column: true },
    ...imageCommon,
    samples: { type: 'samples', shape: 'prompt', default: samples.image },
    steps: { type: 'integer', default: 2000, min: 1, max: MAX_TRAINING_STEPS },
    timestep_type: { type: 'string', default: 'sigmoid', enum: TIMESTEP_TYPES },
    use_lora: { type: 'boolean', default: true },
  },
};

const typeName = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

function isHttpUrl(value: unknown): boolean {
  if (typeof value !== 'string') return false;
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}

function checkSamples(field: string, value: unknown, shape: SampleShape, problems: FieldProblem[]): void {
  if (!Array.isArray(value)) {
    problems.push({ field, message: `must be an array of objects, got ${typeName(value)}` });
    return;
  }
  const keys = shape === 'prompt' ? ['prompt'] : [shape, 'prompt'];
  value.forEach((item, i) => {
    const at = `${field}[${i}]`;
    if (item === null || typeof item !== 'object' || Array.isArray(item)) {
      problems.push({ field: at, message: `must be an object with ${keys.join(' and ')}, got ${typeName(item)}` });
      return;
    }
    const sample = item as Record<string, unknown>;
    for (const key of Object.keys(sample))
      if (!keys.includes(key)) problems.push({ field: `${at}.${key}`, message: `is not a sample field; allowed: ${keys.join(', ')}` });
    if (typeof sample.prompt !== 'string' || sample.prompt.trim() === '')
      problems.push({ field: `${at}.prompt`, message: sample.prompt === undefined ? 'is required' : 'must be a non-empty string' });
    if (shape === 'ctrl_img_url' && !isHttpUrl(sample.ctrl_img_url))
      problems.push({ field: `${at}.ctrl_img_url`, message: sample.ctrl_img_url === undefined ? 'is required' : 'must be an http(s) URL' });
    if (shape === 'ctrl_img_urls') {
      const urls = sample.ctrl_img_urls;
      if (!Array.isArray(urls) || urls.length === 0) problems.push({ field: `${at}.ctrl_img_urls`, message: urls === undefined ? 'is required' : 'must be a non-empty array of http(s) URLs' });
      else urls.forEach((u, j) => {
        if (!isHttpUrl(u)) problems.push({ field: `${at}.ctrl_img_urls[${j}]`, message: 'must be an http(s) URL' });
      });
    }
  });
}

function checkValue(field: string, spec: ParamSpec, value: unknown, problems: FieldProblem[]): void {
  switch (spec.type) {
    case 'string':
      if (typeof value !== 'string') problems.push({ field, message: `must be a string, got ${typeName(value)}` });
      else if (spec.enum && !spec.enum.includes(value)) problems.push({ field, message: `must be one of ${spec.enum.join(', ')}` });
      else if (spec.column && value.trim() === '') problems.push({ field, message: 'must name a dataset column' });
      return;
    case 'string[]':
      if (!Array.isArray(value)) problems.push({ field, message: `must be an array of strings, got ${typeName(value)}` });
      else
        value.forEach((v, i) => {
          if (typeof v !== 'string' || v.trim() === '') problems.push({ field: `${field}[${i}]`, message: 'must be a non-empty string naming a dataset column' });
        });
      return;
    case 'integer':
    case 'number':
      if (typeof value !== 'number' || !Number.isFinite(value)) problems.push({ field, message: `must be ${spec.type === 'integer' ? 'an integer' : 'a number'}, got ${typeName(value)}` });
      else if (spec.type === 'integer' && !Number.isSafeInteger(value)) problems.push({ field, message: `must be an integer, got ${value}` });
      else if (spec.min !== undefined && value < spec.min) problems.push({ field, message: `must be >= ${spec.min}, got ${value}` });
      else if (spec.max !== undefined && value > spec.max) problems.push({ field, message: `must be <= ${spec.max}, got ${value}` });
      return;
    case 'boolean':
      if (typeof value !== 'boolean') problems.push({ field, message: `must be a boolean, got ${typeName(value)}` });
      return;
    case 'samples':
      checkSamples(field, value, spec.shape, problems);
      return;
  }
}

/**
 * Checks training_params against its script type's table and fills in the defaults. Every
 * problem is collected (unknown fields, missing required ones, types, minimums, enums).
 */
export function validateTrainingParams(scriptType: ScriptType, raw: unknown): { params: Record<string, unknown>; problems: FieldProblem[] } {
  const problems: FieldProblem[] = [];
  const table = TRAINING_PARAMS[scriptType];
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    problems.push({ field: 'training_params', message: raw === undefined ? 'is required' : `must be an object, got ${typeName(raw)}` });
    return { params: {}, problems };
  }
  const given = raw as Record<string, unknown>;
  const params: Record<string, unknown> = {};
  for (const key of Object.keys(given))
    if (!Object.hasOwn(table, key)) problems.push({ field: `training_params.${key}`, message: `is not a training parameter of script_type ${scriptType}` });
  for (const [name, spec] of Object.entries(table)) {
    const field = `training_params.${name}`;
    if (!Object.hasOwn(given, name) || given[name] === undefined) {
      if ('required' in spec && spec.required) problems.push({ field, message: 'is required' });
      else if ('default' in spec && spec.default !== undefined) params[name] = structuredClone(spec.default);
      continue;
    }
    checkValue(field, spec, given[name], problems);
    params[name] = given[name];
  }
  return { params, problems };
}

/** The dataset columns a validated params object refers to, with the field naming each. */
export function referencedColumns(scriptType: ScriptType, params: Record<string, unknown>): { field: string; column: string }[] {
  const out: { field: string; column: string }[] = [];
  for (const [name, spec] of Object.entries(TRAINING_PARAMS[scriptType])) {
    if (!('column' in spec) || !spec.column) continue;
    const value = params[name];
    if (typeof value === 'string' && value !== '') out.push({ field: `training_params.${name}`, column: value });
    if (Array.isArray(value))
      value.forEach((v, i) => {
        if (typeof v === 'string' && v !== '') out.push({ field: `training_params.${name}[${i}]`, column: v });
      });
  }
  return out;
}
