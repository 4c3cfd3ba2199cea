import { SCRIPT_TYPES, SUPPORTED_BASE_MODELS, type ScriptType } from './base-models';
import { TRAINING_PARAMS, type ParamSpec } from './training-params';

type JsonSchema = Record<string, unknown>;

const httpUrl: JsonSchema = { type: 'string', format: 'uri', pattern: '^https?://' };
const nonEmpty: JsonSchema = { type: 'string', pattern: '\\S' };

function sampleSchema(shape: 'ctrl_img_url' | 'ctrl_img_urls' | 'prompt'): JsonSchema {
  const properties: Record<string, JsonSchema> = { prompt: nonEmpty };
  if (shape === 'ctrl_img_url') properties.ctrl_img_url = httpUrl;
  if (shape === 'ctrl_img_urls') properties.ctrl_img_urls = { type: 'array', minItems: 1, items: httpUrl };
  return { type: 'object', additionalProperties: false, required: Object.keys(properties), properties };
}

/** One ParamSpec as JSON Schema: the same types, enums and inclusive minimums validateTrainingParams checks. */
function paramSchema(spec: ParamSpec): JsonSchema {
  const withDefault = (s: JsonSchema): JsonSchema => ('default' in spec && spec.default !== undefined ? { ...s, default: structuredClone(spec.default) } : s);
  switch (spec.type) {
    case 'string':
      return withDefault({
        type: 'string',
        ...(spec.enum && { enum: [...spec.enum] }),
        ...(spec.column && { pattern: '\\S', description: 'A column of the dataset' }),
      });
    case 'string[]':
      return withDefault({ type: 'array', items: { ...nonEmpty, description: 'A column of the dataset' } });
    case 'integer':
    case 'number':
      return withDefault({ type: spec.type, ...(spec.min !== undefined && { minimum: spec.min }) });
    case 'boolean':
      return withDefault({ type: 'boolean' });
    case 'samples':
      return withDefault({ type: 'array', items: sampleSchema(spec.shape), description: 'Prompts rendered during training to show progress' });
  }
}

/** training_params of one script type, generated from the table the API validates with. */
export function trainingParamsJsonSchema(scriptType: ScriptType): JsonSchema {
  const table = TRAINING_PARAMS[scriptType];
  return {
    type: 'object',
    additionalProperties: false,
    required: Object.entries(table)
      .filter(([, spec]) => 'required' in spec && spec.required)
      .map(([name]) => name),
    properties: Object.fromEntries(Object.entries(table).map(([name, spec]) => [name, paramSchema(spec)])),
  };
}

/**
 * The body of POST /api/repos/{ns}/{repo}/fine_tunes, one alternative per script type (its
 * base models and training_params), built from SUPPORTED_BASE_MODELS and TRAINING_PARAMS so the
 * published description cannot drift from parseCreateFineTune.
 */
export function createFineTuneJsonSchema(): JsonSchema {
  return {
    type: 'object',
    required: ['resource', 'base_model', 'script_type', 'training_params'],
    discriminator: { propertyName: 'script_type' },
    oneOf: SCRIPT_TYPES.map((scriptType) => ({
      title: scriptType,
      type: 'object',
      additionalProperties: false,
      required: ['resource', 'base_model', 'script_type', 'training_params'],
      properties: {
        name: { type: 'string', minLength: 1, maxLength: 200, pattern: '\\S' },
        resource: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,99}/.+\\.parquet$', description: '<branch>/<file>.parquet in the repository', examples: ['main/train.parquet'] },
        base_model: { type: 'string', enum: [...SUPPORTED_BASE_MODELS[scriptType]] },
        script_type: { type: 'string', const: scriptType },
        training_params: trainingParamsJsonSchema(scriptType),
      },
    })),
  };
}
