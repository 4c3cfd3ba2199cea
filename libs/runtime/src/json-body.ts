import sjson from 'secure-json-parse';
import { ApiError } from '@atelier/contracts';

/**
 * Deepest nesting a JSON body may have. Validators, schema compilers and serializers recurse
 * over the body; 10,000 levels overflowed their stacks (a 500). No request atelier serves needs
 * more than a dozen levels (a JSON Schema in response_format or tools, tool-call arguments).
 */
export const MAX_JSON_DEPTH = 64;

/** secure-json-parse (Fastify's own) refuses keys that would reach an object's prototype. */
const PROTOTYPE_KEYS = { protoAction: 'error', constructorAction: 'error' } as const;

/**
 * Parses a JSON request body. Runs before anything recursive sees the body: nesting is measured
 * by one linear scan of the text, and keys that would reach an object's prototype (`__proto__`,
 * `constructor.prototype`) are refused by secure-json-parse, each with a 400 that names the rule.
 * An empty body is no body (clients that always send `Content-Type: application/json` send one
 * on bodiless POSTs).
 */
export function parseJsonBody(raw: Buffer | string): unknown {
  const text = typeof raw === 'string' ? raw : raw.toString('utf8');
  if (text.trim() === '') return undefined;
  const depth = nestingDepth(text);
  if (depth > MAX_JSON_DEPTH) throw ApiError.badRequest(`JSON nesting is limited to ${MAX_JSON_DEPTH} levels; this body has more`);
  let value: unknown;
  try {
    value = sjson.parse(text, undefined, PROTOTYPE_KEYS);
  } catch (err) {
    if (/forbidden prototype property/.test((err as Error).message))
      throw ApiError.badRequest('JSON keys "__proto__" and "constructor.prototype" are not accepted');
    throw ApiError.badRequest(`Body is not valid JSON: ${(err as Error).message}`);
  }
  // Only a \uD800-\uDFFF escape can produce a lone surrogate (raw bytes are decoded as UTF-8);
  // Postgres, and every provider, refuse such text, so it is refused here with the reason. The
  // pattern only where an escape is (the search for one is a native scan, the pattern 3
  // instructions a character of every prompt).
  if (text.includes('\\u') && /\\u[dD][89a-fA-F]/.test(text)) refuseLoneSurrogates(value);
  return value;
}

/**
 * Deepest [ / { nesting outside strings; stops counting once past the limit. A string is passed
 * over with indexOf, to its closing quote past any escapes: a prompt is nearly all string, and
 * looked at a character at a time it cost the gateway 33 instructions a character (267k of a
 * request with an 8,000-character prompt).
 */
function nestingDepth(text: string): number {
  let depth = 0;
  let max = 0;
  // The next quote and backslash at or after where they were last looked for (text.length: none).
  let quote = -1;
  let backslash = -1;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      for (let at = i + 1; ; at = backslash + 2) {
        if (quote < at) quote = text.indexOf('"', at);
        // Never closed: JSON.parse refuses the body.
        if (quote < 0) return max;
        if (backslash < at) {
          backslash = text.indexOf('\\', at);
          if (backslash < 0) backslash = text.length;
        }
        // The quote ends the string unless an escape comes first (which may be the quote's own).
        if (backslash > quote) break;
      }
      i = quote;
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) {
        max = depth;
        if (max > MAX_JSON_DEPTH) return max;
      }
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return max;
}

/**
 * Visits every key and value of a parsed body, iteratively (the depth is already bounded, but
 * nothing here needs the stack); `visit` throws to refuse the body.
 */
function forEachEntry(root: unknown, visit: (key: string | undefined, value: unknown) => void): void {
  const stack: [string | undefined, unknown][] = [[undefined, root]];
  while (stack.length > 0) {
    const [key, node] = stack.pop()!;
    visit(key, node);
    if (Array.isArray(node)) for (const item of node) stack.push([undefined, item]);
    else if (node !== null && typeof node === 'object') for (const entry of Object.entries(node)) stack.push(entry);
  }
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function refuseLoneSurrogates(root: unknown): void {
  forEachEntry(root, (key, value) => {
    if ((key !== undefined && LONE_SURROGATE.test(key)) || (typeof value === 'string' && LONE_SURROGATE.test(value)))
      throw ApiError.badRequest('Strings must be valid Unicode: an unpaired surrogate escape (\\ud800-\\udfff) is not accepted');
  });
}
