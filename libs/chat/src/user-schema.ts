import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import type { JsonSchemaObject } from '@atelier/models';

/**
 * Callers send JSON Schemas of their own (tool parameters, response_format.json_schema). They
 * are read leniently (unknown keywords such as OpenAI's `strict` hints are ignored) but a
 * schema Ajv could not compile is the caller's error, reported by field name.
 */
const ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: true, logger: false });
addFormats(ajv);

// Tool schemas repeat on every turn of a conversation; checking or compiling costs far more than a lookup.
const MAX_CACHED = 500;
/**
 * Only schemas whose JSON is at most this long are remembered, so the memory stays under 8 MB
 * (500 keys of a schema near MAX_SCHEMA_NODES, ~200 KB each, would hold 100 MB); tool schemas
 * are a few KB. A larger one is checked (or compiled) again each time it comes.
 */
const MAX_CACHED_CHARS = 16_384;
const compiled = new Map<string, ValidateFunction>();
/** Schemas checkUserSchema passed, by their JSON. */
const checked = new Set<string>();

/**
 * What compiles the schemas that validate values (compileUserSchema), with Ajv's code optimizer
 * off: these are compiled far more often than the few values each checks, and it made compiling
 * 3-6 times slower. An Ajv instance keeps every schema it compiled and its code for as long as it
 * lives (its scope: about 4.5 KB a schema, removeSchema does not free it), so after MAX_CACHED
 * compiles a new one takes over, and the validators the old one made are let go with it.
 */
const newCompiler = () => {
  const instance = new Ajv2020({ strict: false, allErrors: false, validateFormats: true, logger: false, code: { optimize: false } });
  addFormats(instance);
  return instance;
};
let compiler = newCompiler();
let compiledByThisCompiler = 0;

/**
 * The most objects and arrays one schema may hold: what checking it costs the gateway, and
 * compiling it the chat service, grows with it (OpenAI allows 5,000 object properties in a
 * structured-output schema). Ajv's compile is superlinear: 2,000 properties took it 1 s.
 */
export const MAX_SCHEMA_NODES = 5_000;

export class UserSchemaError extends Error {
  constructor(
    message: string,
    /** Refused for its size, not its content. */
    readonly tooLarge = false,
  ) {
    super(message);
  }
}

/** The 400's text for a caller schema refused at `field` (by the gateway's check, or by local-chat's compile). */
export function schemaRefusal(field: string, err: UserSchemaError): string {
  return err.tooLarge ? `${field} is too large: ${err.message}` : `${field} is not a valid JSON Schema: ${err.message}`;
}

/** Keywords whose value is a schema or an array of schemas. */
const SUBSCHEMA = new Set(['additionalProperties', 'items', 'prefixItems', 'contains', 'propertyNames', 'not', 'if', 'then', 'else', 'allOf', 'anyOf', 'oneOf', 'unevaluatedItems', 'unevaluatedProperties', 'additionalItems', 'contentSchema']);
/** Keywords whose value is an object of schemas by name. */
const SUBSCHEMA_MAPS = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas', 'dependencies']);

/**
 * Refuses a schema Ajv could not compile, without compiling it: a schema is checked on every
 * request that brings a new one, and compiling even ten properties took Ajv 1-1.6 ms (a whole
 * gateway request costs about 0.15 ms of CPU), 83 KB of them a second of the event loop. Checked
 * instead: its size (MAX_SCHEMA_NODES), the meta-schema (what compile checks first, linear in the
 * schema: 2,000 properties in 1-2 ms), and what compiling adds to it, on the schemas compile
 * would reach (the root, what it applies, and what references lead to; not $defs nobody refers
 * to): every `pattern` and `patternProperties` key is a regular expression in Unicode mode, and
 * every `$ref` and `$dynamicRef` points at a schema inside this one (a JSON pointer, or an anchor
 * below the root) without going round in references alone. Ajv fetches nothing, so a reference
 * elsewhere could not be compiled (OpenAI accepts only these too).
 */
export function checkUserSchema(schema: JsonSchemaObject): void {
  const anchors = sizeAndAnchors(schema);
  const key = JSON.stringify(schema);
  if (checked.has(key) || compiled.has(key)) return;
  // Against draft 2020-12's meta-schema whatever $schema says, as compileUserSchema reads it.
  const { $schema: _ignored, ...rest } = schema;
  if (!ajv.validateSchema(rest)) throw new UserSchemaError(`schema is invalid: ${ajv.errorsText(ajv.errors)}`);
  checkReachable(schema, anchors);
  if (key.length > MAX_CACHED_CHARS) return;
  if (checked.size >= MAX_CACHED) checked.delete(checked.values().next().value as string);
  checked.add(key);
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Counts the schema's objects and arrays (refusing it past MAX_SCHEMA_NODES, before anything
 * reads it whole), and returns its anchors, each name with the schema that declares it. Data
 * (enum, const, default, examples, unknown keywords) is counted, never read as a schema. Ajv
 * resolves no anchor of the root itself.
 */
function sizeAndAnchors(schema: JsonSchemaObject): Map<string, object> {
  const anchors = new Map<string, object>();
  let nodes = 0;
  const count = () => {
    if (++nodes > MAX_SCHEMA_NODES) throw new UserSchemaError(`it holds more than ${MAX_SCHEMA_NODES} objects and arrays`, true);
  };
  const visit = (value: unknown, asSchema: boolean, root = false) => {
    if (typeof value !== 'object' || value === null) return;
    count();
    if (Array.isArray(value)) {
      for (const item of value) visit(item, asSchema);
      return;
    }
    for (const [keyword, child] of Object.entries(value)) {
      if (!asSchema) visit(child, false);
      else if ((keyword === '$anchor' || keyword === '$dynamicAnchor') && typeof child === 'string') {
        if (!root && !anchors.has(child)) anchors.set(child, value);
      } else if (SUBSCHEMA_MAPS.has(keyword) && isObject(child)) {
        count();
        for (const sub of Object.values(child)) visit(sub, true);
      } else visit(child, SUBSCHEMA.has(keyword));
    }
  };
  visit(schema, true, true);
  return anchors;
}

/** The patterns and references of every schema compile would reach from the root (checkUserSchema). */
function checkReachable(root: JsonSchemaObject, anchors: ReadonlyMap<string, object>): void {
  const regex = (source: string) => {
    try {
      new RegExp(source, 'u');
    } catch (err) {
      throw new UserSchemaError((err as Error).message);
    }
  };
  const target = (ref: string): unknown => {
    const found = resolve(root, ref, anchors);
    if (found === undefined) throw new UserSchemaError(`can't resolve reference ${ref} from id #`);
    return found;
  };
  const seen = new Set<object>();
  const pending: unknown[] = [root];
  while (pending.length > 0) {
    const node = pending.pop();
    if (!isObject(node) || seen.has(node)) continue;
    seen.add(node);
    for (const [keyword, child] of Object.entries(node)) {
      if ((keyword === '$ref' || keyword === '$dynamicRef') && typeof child === 'string') {
        let next = target(child);
        // A schema that is a reference and nothing else stands for its target: a ring of them never reaches a schema.
        for (const ring = new Set<unknown>([node]); isPureReference(next); next = target(next.$ref)) {
          if (ring.has(next)) throw new UserSchemaError(`reference ${child} leads round in references that never reach a schema`);
          ring.add(next);
        }
        pending.push(next);
      } else if (keyword === 'pattern' && typeof child === 'string') regex(child);
      else if (keyword === 'patternProperties' && isObject(child)) {
        for (const [source, sub] of Object.entries(child)) {
          regex(source);
          pending.push(sub);
        }
      } else if (SUBSCHEMA.has(keyword)) pending.push(...(Array.isArray(child) ? child : [child]));
      else if (SUBSCHEMA_MAPS.has(keyword) && keyword !== '$defs' && keyword !== 'definitions' && isObject(child)) pending.push(...Object.values(child));
    }
  }
}

const isPureReference = (value: unknown): value is { $ref: string } =>
  isObject(value) && typeof value.$ref === 'string' && Object.keys(value).length === 1;

/** The schema a reference points at in `root` (`#`, `#` and a JSON pointer, or `#` and an anchor's name), or undefined. */
function resolve(root: JsonSchemaObject, ref: string, anchors: ReadonlyMap<string, object>): unknown {
  if (!ref.startsWith('#')) return undefined;
  let fragment: string;
  try {
    fragment = decodeURIComponent(ref.slice(1));
  } catch {
    return undefined;
  }
  if (fragment === '') return root;
  if (!fragment.startsWith('/')) return anchors.get(fragment);
  let at: unknown = root;
  for (const token of fragment.slice(1).split('/')) {
    const name = token.replaceAll('~1', '/').replaceAll('~0', '~');
    if (typeof at !== 'object' || at === null || !Object.hasOwn(at, name)) return undefined;
    at = (at as Record<string, unknown>)[name];
  }
  return typeof at === 'boolean' || isObject(at) ? at : undefined;
}

/**
 * The schema compiled, for the code that validates values with it (local-chat's generated
 * arguments); callers' schemas were checked by the gateway first (checkUserSchema).
 */
export function compileUserSchema(schema: JsonSchemaObject): ValidateFunction {
  const key = JSON.stringify(schema);
  const hit = compiled.get(key);
  if (hit) return hit;
  if (compiledByThisCompiler >= MAX_CACHED) {
    compiler = newCompiler();
    compiledByThisCompiler = 0;
    compiled.clear();
  }
  compiledByThisCompiler++;
  let validate: ValidateFunction;
  try {
    // $schema of another draft would make Ajv look for a meta-schema it does not have.
    const { $schema: _ignored, ...rest } = schema;
    validate = compiler.compile(rest);
  } catch (err) {
    throw new UserSchemaError((err as Error).message);
  }
  if (key.length > MAX_CACHED_CHARS) return validate;
  if (compiled.size >= MAX_CACHED) compiled.delete(compiled.keys().next().value as string);
  compiled.set(key, validate);
  return validate;
}

/** Ajv's first error as "<path> <message>", for messages about generated values. */
export function firstSchemaError(validate: ValidateFunction): string {
  const e = validate.errors?.[0];
  if (!e) return 'is invalid';
  return `${e.instancePath || '(root)'} ${e.message ?? 'is invalid'}`;
}
