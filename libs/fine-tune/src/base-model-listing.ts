import { SCRIPT_TYPES, SUPPORTED_BASE_MODELS, type ScriptType } from './base-models';
import { trainingParamsJsonSchema } from './fine-tune-json-schema';
import { TRAINING_PARAMS } from './training-params';

/**
 * A create body for a script type that passes validation as it is (given a dataset with these
 * columns): the first supported base model, the dataset columns named after their parameters
 * (`question_column: "question"`), everything else left to its default.
 */
export function exampleCreateBody(scriptType: ScriptType): Record<string, unknown> {
  const trainingParams: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(TRAINING_PARAMS[scriptType])) {
    if (!('required' in spec) || !spec.required) continue;
    const column = name.replace(/_columns?$/, '');
    trainingParams[name] = spec.type === 'string[]' ? [column] : column;
  }
  return { name: `my ${scriptType.replace(/_/g, ' ')} fine-tune`, resource: 'main/train.parquet', base_model: SUPPORTED_BASE_MODELS[scriptType][0], script_type: scriptType, training_params: trainingParams };
}

export interface ScriptTypeListing {
  script_type: ScriptType;
  base_models: readonly string[];
  /** JSON Schema of training_params, with each parameter's default and minimum. */
  training_params_schema: Record<string, unknown>;
  /** A create body for this script type (POST /api/repos/{namespace}/{repo}/fine_tunes). */
  example: Record<string, unknown>;
}

/** GET /api/fine_tunes/base_models: what a fine-tune can be made of, per script type. */
export function baseModelListing(): { data: ScriptTypeListing[] } {
  return {
    data: SCRIPT_TYPES.map((scriptType) => ({
      script_type: scriptType,
      base_models: SUPPORTED_BASE_MODELS[scriptType],
      training_params_schema: trainingParamsJsonSchema(scriptType) as Record<string, unknown>,
      example: exampleCreateBody(scriptType),
    })),
  };
}
