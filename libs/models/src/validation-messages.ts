import type { ErrorObject } from 'ajv/dist/2020';
import type { JsonSchema, JsonSchemaObject, JsonType, ValidationIssue } from './model-types';

export interface FormatOptions {
  /** Request bodies get the spec's error texts and "unknown parameter" wording; catalog files do not. */
  requestBody: boolean;
  /** How to name the document itself when the error is about the root. */
  rootLabel: string;
}

/** Error texts fixed by the API spec, used when these top-level fields are missing or empty. */
const SPEC_EMPTY_MESSAGES: Readonly<Record<string, string>> = {
  model: 'You must specify a model to call',
  messages: 'Messages array cannot be empty',
  prompt: 'Prompt cannot be empty',
};
const EMPTY_KEYWORDS = new Set(['required', 'minLength', 'minItems', 'pattern']);

const TYPE_NOUNS: Readonly<Record<JsonType, string>> = {
  string: 'a string',
  number: 'a number',
  integer: 'an integer',
  boolean: 'a boolean',
  array: 'an array',
  object: 'an object',
  null: 'null',
};

const FORMAT_NOUNS: Readonly<Record<string, string>> = {
  'media-url': 'a public http(s) URL or a data URI',
  decimal: 'a decimal string such as "0.01"',
};

function isSchemaObject(schema: unknown): schema is JsonSchemaObject {
  return typeof schema === 'object' && schema !== null && !Array.isArray(schema);
}

function pointerToField(pointer: string): string {
  if (pointer === '') return '';
  return pointer
    .slice(1)
    .split('/')
    .map((segment) => segment.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((field, segment) => joinField(field, segment), '');
}

function joinField(parent: string, child: string): string {
  if (/^\d+$/.test(child)) return `${parent}[${child}]`;
  return parent === '' ? child : `${parent}.${child}`;
}

function literal(value: unknown): string {
  return typeof value === 'string' ? `'${value}'` : JSON.stringify(value);
}

function typesOf(schema: JsonSchemaObject): JsonType[] {
  if (schema.type === undefined) return [];
  return Array.isArray(schema.type) ? schema.type : [schema.type];
}

function rangeText(schema: JsonSchemaObject): string | undefined {
  const noun = typesOf(schema).includes('integer') ? 'an integer' : 'a number';
  if (schema.minimum !== undefined && schema.maximum !== undefined) {
    return `${noun} between ${schema.minimum} and ${schema.maximum}`;
  }
  return undefined;
}

/** A short English description of what a schema accepts, for "x must be ..." messages. */
export function describeSchema(schema: JsonSchema): string {
  if (!isSchemaObject(schema)) return schema ? 'any value' : 'absent';
  if (schema.const !== undefined) return literal(schema.const);
  if (schema.enum !== undefined) return `one of: ${schema.enum.map((v) => (typeof v === 'string' ? v : JSON.stringify(v))).join(', ')}`;
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives !== undefined) {
    const described = alternatives.map(describeSchema);
    // "a URL or a data URI or an array of strings" is ambiguous; the comma shows where the alternatives split.
    return described.join(described.some((d) => d.includes(' or ')) ? ', or ' : ' or ');
  }
  const types = typesOf(schema);
  if (types.length === 1) {
    const [type] = types;
    if (type === 'integer' || type === 'number') return rangeText(schema) ?? TYPE_NOUNS[type];
    if (type === 'string' && schema.format !== undefined && FORMAT_NOUNS[schema.format] !== undefined) {
      return FORMAT_NOUNS[schema.format];
    }
    if (type === 'array' && isSchemaObject(schema.items) && typeof schema.items.type === 'string') {
      return `an array of ${schema.items.type}s`;
    }
    return TYPE_NOUNS[type];
  }
  if (types.length > 1) return types.map((t) => TYPE_NOUNS[t]).join(' or ');
  return 'a valid value';
}

function jsonTypeMatches(type: JsonType, data: unknown): boolean {
  switch (type) {
    case 'null':
      return data === null;
    case 'array':
      return Array.isArray(data);
    case 'object':
      return isSchemaObject(data);
    case 'integer':
    case 'number':
      return typeof data === 'number';
    default:
      return typeof data === type;
  }
}

/**
 * For a failed anyOf/oneOf, the branch whose declared type matches the value is almost always the one the
 * caller meant, so its errors are more useful than a generic "must be X or Y". Returns undefined when no
 * single branch stands out.
 */
function pickBranch(error: ErrorObject): number | undefined {
  if (!Array.isArray(error.schema)) return undefined;
  const branches: unknown[] = error.schema;
  const matching = branches.flatMap((branch, index) =>
    isSchemaObject(branch) && typesOf(branch).some((t) => jsonTypeMatches(t, error.data)) ? [index] : [],
  );
  return matching.length === 1 ? matching[0] : undefined;
}

function customMessage(error: ErrorObject): string | undefined {
  const message = error.parentSchema?.['x-error-message'];
  return typeof message === 'string' ? message : undefined;
}

function isCompound(error: ErrorObject): boolean {
  return customMessage(error) !== undefined || error.keyword === 'anyOf' || error.keyword === 'oneOf';
}

function discriminatorValues(schema: JsonSchemaObject, tag: string): string {
  const values = (schema.oneOf ?? []).flatMap((branch) => {
    const tagSchema = isSchemaObject(branch) ? branch.properties?.[tag] : undefined;
    if (!isSchemaObject(tagSchema)) return [];
    return tagSchema.const !== undefined ? [tagSchema.const] : (tagSchema.enum ?? []);
  });
  return values.map(String).join(', ');
}

function messageFor(error: ErrorObject, options: FormatOptions): ValidationIssue | undefined {
  const params: Record<string, unknown> = error.params;
  const schema: JsonSchemaObject = isSchemaObject(error.parentSchema) ? error.parentSchema : {};
  let field = pointerToField(error.instancePath);
  const label = (): string => field || options.rootLabel;
  const issue = (message: string): ValidationIssue => {
    const specText = SPEC_EMPTY_MESSAGES[field];
    if (options.requestBody && specText !== undefined && EMPTY_KEYWORDS.has(error.keyword)) {
      return { field, message: specText, keyword: error.keyword };
    }
    return { field, message, keyword: error.keyword };
  };

  switch (error.keyword) {
    case 'if':
      // The failing "then" branch reports the actual problem.
      return undefined;
    case 'required':
      field = joinField(field, String(params.missingProperty));
      return issue(`${field} is required`);
    case 'additionalProperties': {
      const name = String(params.additionalProperty);
      const topLevel = field === '';
      field = joinField(field, name);
      return issue(options.requestBody && topLevel ? `unknown parameter '${name}'` : `unknown field '${field}'`);
    }
    case 'type':
      return issue(`${label()} must be ${describeSchema(schema)}`);
    case 'minimum':
    case 'maximum': {
      const range = rangeText(schema);
      if (range !== undefined) return issue(`${label()} must be ${range}`);
      return issue(`${label()} must be ${error.keyword === 'minimum' ? '>=' : '<='} ${String(params.limit)}`);
    }
    case 'exclusiveMinimum':
      return issue(`${label()} must be > ${String(params.limit)}`);
    case 'exclusiveMaximum':
      return issue(`${label()} must be < ${String(params.limit)}`);
    case 'enum':
    case 'const':
      return issue(`${label()} must be ${describeSchema(schema)}`);
    case 'minLength':
      return issue(
        params.limit === 1 ? `${label()} cannot be empty` : `${label()} must be at least ${String(params.limit)} characters long`,
      );
    case 'maxLength':
      return issue(`${label()} must be at most ${String(params.limit)} characters long`);
    case 'minItems':
      return issue(
        params.limit === 1 ? `${label()} cannot be empty` : `${label()} must contain at least ${String(params.limit)} items`,
      );
    case 'maxItems':
      return issue(`${label()} must contain at most ${String(params.limit)} items`);
    case 'uniqueItems':
      return issue(`${label()} must not contain duplicate items`);
    case 'pattern':
      return issue(`${label()} must match the pattern ${String(params.pattern)}`);
    case 'format': {
      const format = String(params.format);
      return issue(`${label()} must be ${FORMAT_NOUNS[format] ?? `a valid ${format}`}`);
    }
    case 'discriminator': {
      const tag = String(params.tag);
      const present = isSchemaObject(error.data) && error.data[tag] !== undefined;
      field = joinField(field, tag);
      if (params.error === 'mapping') return issue(`${field} must be one of: ${discriminatorValues(schema, tag)}`);
      return issue(present ? `${field} must be a string` : `${field} is required`);
    }
    case 'not':
    case 'false schema':
      return issue(`${label()} is not allowed`);
    default:
      return issue(`${label()} ${error.message ?? 'is invalid'}`);
  }
}

/**
 * Turns Ajv errors into one message per real problem. Ajv reports every failed branch of an anyOf/oneOf plus
 * the combinator itself; these are collapsed (or narrowed to the branch the caller evidently meant) so the
 * user sees "input_image must be ..." once instead of three unrelated-looking errors.
 */
export function formatAjvErrors(errors: readonly ErrorObject[], options: FormatOptions): ValidationIssue[] {
  const hidden = new Set<ErrorObject>();
  const replacements = new Map<ErrorObject, ValidationIssue>();
  const hideUnder = (prefix: string, except?: string): void => {
    for (const e of errors) {
      if (e.schemaPath.startsWith(prefix) && (except === undefined || !e.schemaPath.startsWith(except))) hidden.add(e);
    }
  };

  // Outermost first, so an outer decision also covers combinators nested inside it.
  const compound = errors.filter(isCompound).sort((a, b) => a.schemaPath.length - b.schemaPath.length);
  for (const error of compound) {
    if (hidden.has(error)) continue;
    const field = pointerToField(error.instancePath);
    const custom = customMessage(error);
    if (custom !== undefined) {
      hideUnder(error.schemaPath.slice(0, error.schemaPath.lastIndexOf('/') + 1));
      replacements.set(error, { field, message: custom, keyword: error.keyword });
      continue;
    }
    hidden.add(error);
    const branch = pickBranch(error);
    if (branch !== undefined) {
      hideUnder(`${error.schemaPath}/`, `${error.schemaPath}/${branch}/`);
      continue;
    }
    hideUnder(`${error.schemaPath}/`);
    const label = field || options.rootLabel;
    const params: Record<string, unknown> = error.params;
    const message =
      error.keyword === 'oneOf' && Array.isArray(params.passingSchemas)
        ? `${label} matches more than one allowed form`
        : `${label} must be ${describeSchema(isSchemaObject(error.parentSchema) ? error.parentSchema : {})}`;
    replacements.set(error, { field, message, keyword: error.keyword });
  }

  const seen = new Set<string>();
  const issues: ValidationIssue[] = [];
  for (const error of errors) {
    const issue = replacements.get(error) ?? (hidden.has(error) ? undefined : messageFor(error, options));
    if (issue === undefined) continue;
    const key = `${issue.field}\u0000${issue.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    issues.push(issue);
  }
  return issues;
}
