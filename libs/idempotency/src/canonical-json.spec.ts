import { canonicalJson, requestHash } from './canonical-json';

describe('canonicalJson', () => {
  it('gives bodies that parse to the same value the same text, at every depth', () => {
    const a = JSON.parse('{"model":"local-image","params":{"seed":1,"size":"64x64"},"n":[1,{"b":2,"a":1}]}');
    const b = JSON.parse('{ "n": [1, {"a": 1, "b": 2}], "params": {"size": "64x64", "seed": 1}, "model": "local-image" }');
    expect(canonicalJson(a)).toBe(canonicalJson(b));
    expect(canonicalJson(a)).toBe('{"model":"local-image","n":[1,{"a":1,"b":2}],"params":{"seed":1,"size":"64x64"}}');
    expect(requestHash(a)).toBe(requestHash(b));
  });

  it('tells apart bodies that differ in any value, in array order or in type', () => {
    const base = { prompt: 'cat', n: [1, 2] };
    for (const other of [{ prompt: 'dog', n: [1, 2] }, { prompt: 'cat', n: [2, 1] }, { prompt: 'cat', n: ['1', 2] }, { prompt: 'cat' }])
      expect(requestHash(other)).not.toBe(requestHash(base));
    // No body and an explicit null are the same request (a POST without a body).
    expect(requestHash(undefined)).toBe(requestHash(null));
    expect(requestHash({})).not.toBe(requestHash(null));
  });
});
