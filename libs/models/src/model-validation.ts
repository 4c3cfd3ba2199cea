import type { ValidateFunction } from 'ajv/dist/2020';
import { sharedAjv } from './ajv-factory';
import { buildJsonRequestSchema, supportsQueue } from './model-schema';
import type { ModelDefinition, RequestBody, RequestMode, ValidateOptions, ValidationResult } from './model-types';
import { formatAjvErrors } from './validation-messages';

/**
 * Keyed by the definition object rather than the model id: two catalogs (e.g. a test fixture and the real one)
 * may hold different definitions under the same id, and a stale validator would silently apply the wrong rules.
 */
const validators = new WeakMap<ModelDefinition, Partial<Record<RequestMode, ValidateFunction>>>();

/** Compiles (once per definition and mode) the validator of the model's json_request_schema. Throws on a bad schema. */
export function compileRequestValidator(model: ModelDefinition, mode: RequestMode = 'sync'): ValidateFunction {
  const cached = validators.get(model) ?? {};
  const existing = cached[mode];
  if (existing !== undefined) return existing;
  const validate = sharedAjv().compile(buildJsonRequestSchema(model, mode));
  validators.set(model, { ...cached, [mode]: validate });
  return validate;
}

function isPlainObject(value: unknown): value is RequestBody {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Validates a request body against the model's json_request_schema. On success `value` is a copy of the body
 * with schema defaults filled in; the caller's object is never modified, unless it passes `inPlace`.
 */
export function validateModelRequest(model: ModelDefinition, body: unknown, options: ValidateOptions = {}): ValidationResult {
  const mode = options.mode ?? 'sync';
  if (mode === 'queue' && !supportsQueue(model)) {
    return {
      ok: false,
      errors: [
        {
          field: 'model',
          keyword: 'queue',
          message: `Model ${model.id} cannot be queued: only image and video models can be queued`,
        },
      ],
    };
  }
  if (!isPlainObject(body)) {
    return { ok: false, errors: [{ field: '', keyword: 'type', message: 'request body must be a JSON object' }] };
  }
  // The copy (structuredClone) cost a chat request more CPU than its own validation.
  const value = options.inPlace ? body : structuredClone(body);
  const validate = compileRequestValidator(model, mode);
  if (validate(value)) return { ok: true, value };
  return { ok: false, errors: formatAjvErrors(validate.errors ?? [], { requestBody: true, rootLabel: 'request body' }) };
}
