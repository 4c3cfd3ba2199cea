import v8 from 'node:v8';
import vm from 'node:vm';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import type { JsonSchemaObject } from '@atelier/models';
import { fc } from '@atelier/testing';
import { checkUserSchema, compileUserSchema, MAX_SCHEMA_NODES, UserSchemaError } from './user-schema';

/** What the gateway did before checkUserSchema: Ajv's compile, whose verdict the check must give. */
const reference = new Ajv2020({ strict: false, allErrors: false, validateFormats: true, logger: false });
addFormats(reference);
const compiles = (schema: JsonSchemaObject) => {
  try {
    reference.compile(schema);
    return true;
  } catch {
    return false;
  } finally {
    // Ajv keeps every schema it compiled.
    reference.removeSchema();
  }
};
const refusal = (schema: JsonSchemaObject) => {
  try {
    checkUserSchema(schema);
    return undefined;
  } catch (err) {
    expect(err).toBeInstanceOf(UserSchemaError);
    return (err as UserSchemaError).message;
  }
};

/** A caller's schema as sent, wrong types included. */
const unchecked = (value: object) => value as JsonSchemaObject;

/** Schemas built from what callers write and get wrong: types, patterns, references, data that looks like a schema. */
const schemaOf = (depth: number): fc.Arbitrary<JsonSchemaObject> => {
  const sub = depth > 0 ? schemaOf(depth - 1) : fc.constant<JsonSchemaObject>({ type: 'string' });
  return fc
    .record(
      {
        type: fc.constantFrom('string', 'object', 'integer', ['string', 'null'], 'strin', 7),
        pattern: fc.constantFrom('^[a-z]+$', '(', '\\-', '\\p{L}+', '[', 'a{2,1}'),
        $ref: fc.constantFrom('#', '#/$defs/a', '#/$defs/missing', '#/properties/x', '#node', '#/$defs/a/type', 'other.json', 'http://example.com/s.json', '#/$defs/b~1c'),
        $anchor: fc.constantFrom('node', 'other'),
        $defs: fc.dictionary(fc.constantFrom('a', 'b/c'), sub, { maxKeys: 2 }),
        properties: fc.dictionary(fc.constantFrom('x', 'pattern', '$ref'), sub, { maxKeys: 2 }),
        patternProperties: fc.dictionary(fc.constantFrom('^s_', '(', '\\d+'), sub, { maxKeys: 1 }),
        items: sub,
        anyOf: fc.array(sub, { minLength: 1, maxLength: 2 }),
        enum: fc.constant([{ pattern: '(' }, { $ref: '#/nowhere' }, 'a']),
        minLength: fc.constantFrom(1, -1, 'two'),
        required: fc.constantFrom(['x'], 'x'),
      },
      { requiredKeys: [] },
    )
    .map(unchecked);
};

describe('checkUserSchema', () => {
  it('refuses exactly the schemas Ajv could not compile, without compiling them', () => {
    fc.assert(
      fc.property(schemaOf(2), (schema) => {
        expect(refusal(schema) === undefined).toBe(compiles(schema));
      }),
      { numRuns: 2_000 },
    );
  });

  it("says why, in Ajv's words", () => {
    expect(refusal(unchecked({ type: 'object', properties: { a: { type: 'strin' } } }))).toMatch(/^schema is invalid: data\/properties\/a\/type must be equal to one of the allowed values/);
    expect(refusal({ type: 'string', pattern: '(' })).toBe('Invalid regular expression: /(/u: Unterminated group');
    expect(refusal({ patternProperties: { '\\-': {} } })).toBe('Invalid regular expression: /\\-/u: Invalid escape');
    expect(refusal({ $ref: '#/$defs/missing' })).toBe("can't resolve reference #/$defs/missing from id #");
    expect(refusal({ $ref: 'https://example.com/person.json' })).toBe("can't resolve reference https://example.com/person.json from id #");
  });

  it('takes references to the root, into $defs (escaped names too) and to anchors, and reads enum and const as data', () => {
    const tree: JsonSchemaObject = {
      $defs: { 'a/b': { type: 'string' }, node: { $anchor: 'node', type: 'object', properties: { next: { $ref: '#node' } } } },
      type: 'object',
      properties: { self: { $ref: '#' }, slash: { $ref: '#/$defs/a~1b' }, list: { $ref: '#/$defs/node' } },
      enum: [{ pattern: '(', $ref: '#/nowhere' }],
      const: { $ref: 'http://x' },
    };
    expect(refusal(tree)).toBeUndefined();
    expect(compiles(tree)).toBe(true);
    // An anchor's name found in data too: the reference leads to the schema that declares it, not to the data.
    const shadowed = unchecked({ $defs: { a: { $anchor: 'x', type: 'string' } }, properties: { p: { $ref: '#x' } }, enum: [{ $anchor: 'x', pattern: '(' }] });
    expect(refusal(shadowed)).toBeUndefined();
    expect(compiles(shadowed)).toBe(true);
  });

  it('refuses a schema of more than MAX_SCHEMA_NODES objects and arrays as too large, before reading it further', () => {
    const wide = (n: number): JsonSchemaObject => ({ type: 'object', properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { type: 'string' }])) });
    // The root, the properties object and one object per property.
    expect(refusal(wide(MAX_SCHEMA_NODES - 2))).toBeUndefined();
    let error: unknown;
    try {
      checkUserSchema(unchecked({ ...wide(MAX_SCHEMA_NODES - 1), type: 'strin' }));
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(UserSchemaError);
    expect((error as UserSchemaError).tooLarge).toBe(true);
    expect((error as UserSchemaError).message).toBe(`it holds more than ${MAX_SCHEMA_NODES} objects and arrays`);
  });

  it('keeps the memory of what it compiled bounded, however many different schemas come', () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const first = compileUserSchema({ type: 'object', properties: { n0: { type: 'integer' } }, required: ['n0'] });
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 1; i < 3_000; i++) compileUserSchema({ type: 'object', properties: { [`n${i}`]: { type: 'integer' } }, required: [`n${i}`] });
    gc();
    // One Ajv instance for all of them kept every schema and its code: 13 MB for 3,000.
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(6 * 2 ** 20);
    // A validator made before the compiler was replaced still works.
    expect(first({ n0: 1 })).toBe(true);
    expect(first({ n0: 'one' })).toBe(false);
  });

  it('compiles what it passed into a validator that reads values as the schema says', () => {
    const schema: JsonSchemaObject = { type: 'object', properties: { city: { type: 'string', pattern: '^\\p{Lu}' } }, required: ['city'] };
    checkUserSchema(schema);
    const validate = compileUserSchema(schema);
    expect(validate({ city: 'Zürich' })).toBe(true);
    expect(validate({ city: 'zürich' })).toBe(false);
    expect(validate({})).toBe(false);
  });
});
