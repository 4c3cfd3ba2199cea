import { fc } from '@atelier/testing';
import { MAX_JSON_DEPTH, parseJsonBody } from './json-body';

/** Strings that look like JSON structure: quotes, escapes, brackets. */
const tricky = fc.string({ unit: fc.constantFrom('"', '\\', '[', ']', '{', '}', 'a', ' ', '\n', 'é'), maxLength: 12 });
const value = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    tricky,
    fc.integer(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(tricky, tie('value'), { maxKeys: 4 }),
  ),
})).value;

/** How deep a parsed value nests: 1 for each array or object around its deepest part. */
function depthOf(v: unknown): number {
  if (Array.isArray(v)) return 1 + Math.max(0, ...v.map(depthOf));
  if (v !== null && typeof v === 'object') return 1 + Math.max(0, ...Object.values(v).map(depthOf));
  return 0;
}

const wrapped = (v: unknown, levels: number) => `${'['.repeat(levels)}${JSON.stringify(v)}${']'.repeat(levels)}`;

describe('parseJsonBody', () => {
  it(`takes bodies nested ${MAX_JSON_DEPTH} levels deep and refuses one level more, whatever their strings hold`, () => {
    fc.assert(
      fc.property(value, (v) => {
        const room = MAX_JSON_DEPTH - depthOf(v);
        expect(parseJsonBody(wrapped(v, room))).toEqual(JSON.parse(wrapped(v, room)));
        expect(() => parseJsonBody(wrapped(v, room + 1))).toThrow(`JSON nesting is limited to ${MAX_JSON_DEPTH} levels`);
      }),
      { numRuns: 1000 },
    );
  });

  it('reads brackets inside strings as text, past escaped quotes and backslashes', () => {
    const deepText = `{"a":"${'\\"[{'.repeat(200)}\\\\","b":"${'['.repeat(200)}"}`;
    expect(parseJsonBody(deepText)).toEqual(JSON.parse(deepText));
  });

  it('refuses prototype keys however they are spelled: escaped, nested, in arrays (the escaped one passed before secure-json-parse)', () => {
    const refused = (raw: string) => {
      try {
        parseJsonBody(raw);
        return undefined;
      } catch (err) {
        return (err as Error).message;
      }
    };
    for (const raw of ['{"\\u005f_proto__":{"admin":true}}', '{"a":[{"b":{"__proto__":{}}}]}', '{"constructor":{"prototype":{"x":1}}}', '{"\\u0063onstructor":{"prototype":{}}}'])
      expect(refused(raw)).toMatch(/"__proto__" and "constructor.prototype" are not accepted/);
    expect(parseJsonBody('{"constructor":"a word","proto":"__proto__ in a string"}')).toEqual({ constructor: 'a word', proto: '__proto__ in a string' });
  });

  it('leaves an unterminated string to JSON.parse, which refuses it', () => {
    expect(() => parseJsonBody('{"a":"[[[')).toThrow('Body is not valid JSON');
    expect(() => parseJsonBody('{"a":"x\\')).toThrow('Body is not valid JSON');
  });
});
