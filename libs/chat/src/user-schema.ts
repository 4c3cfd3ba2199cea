import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import type { JsonSchemaObject } from '@atelier/models';

/**
 * Callers send JSON Schemas of their own (tool parameters, response_format.json_schema). They
 * are compiled leniently (unknown keywords such as OpenAI's `strict` hints are ignored) but a
 * schema Ajv cannot compile is the caller's error, reported by field name.
 */
const ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: true });
addFormats(ajv);

// Tool schemas repeat on every turn of a conversation; compiling costs far more than a lookup.
const MAX_CACHED = 500;
const cache = new Map<string, ValidateFunction>();

export class UserSchemaError extends Error {}

export function compileUserSchema(schema: JsonSchemaObject): ValidateFunction {
  const key = JSON.stringify(schema);
  const hit = cache.get(key);
  if (hit) return hit;
  let validate: ValidateFunction;
  try {
    // $schema of another draft would make Ajv look for a meta-schema it does not have.
    const { $schema: _ignored, ...rest } = schema;
    validate = ajv.compile(rest);
  } catch (err) {
    throw new UserSchemaError((err as Error).message);
  }
  if (cache.size >= MAX_CACHED) cache.delete(cache.keys().next().value as string);
  cache.set(key, validate);
  return validate;
}

/** Ajv's first error as "<path> <message>", for messages about generated values. */
export function firstSchemaError(validate: ValidateFunction): string {
  const e = validate.errors?.[0];
  if (!e) return 'is invalid';
  return `${e.instancePath || '(root)'} ${e.message ?? 'is invalid'}`;
}
