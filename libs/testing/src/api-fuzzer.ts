import fc from 'fast-check';

/** One HTTP request as the fuzzer sends it (raw body: the fuzzer also sends broken JSON). */
export interface FuzzRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
  /** Which route template it came from, for the summary. */
  route: string;
}

export type JsonSchema = Record<string, unknown>;

export interface FuzzRoute {
  method: string;
  /** OpenAPI path, e.g. `/api/repos/{namespace}/{repo}`. */
  path: string;
  /** JSON body schemas to draw valid bodies from (several for the model routes: one per model). */
  bodies: JsonSchema[];
  /** `admin`: sent with the operator token; `key`: with the tenant's API key; `public`: either or none. */
  auth: 'admin' | 'key' | 'trainer' | 'public';
  /** Query parameters the route reads. */
  query?: string[];
  multipart?: boolean;
  weight?: number;
}

export interface FuzzContext {
  apiKey: string;
  adminToken: string;
  /** A trainer's token, for the /api/trainer routes. */
  trainerToken?: string;
  /** Values that make a path parameter real (the tenant's namespace, an existing generation...); `<auth>:<name>` overrides per kind of route. */
  pathValues: Record<string, string[]>;
  /** Resolves a `$ref` of the API document. */
  resolve?: (schema: JsonSchema, ref: string) => JsonSchema | undefined;
}

const SURROGATES = ['\ud800', '\udfff', 'a\ud83dz', '\ud83d\ude00'];

/** Values chosen to break parsers, validators, arithmetic and file paths. */
export function hostileValue(): fc.Arbitrary<unknown> {
  return fc.oneof(
    fc.constantFrom<unknown>(
      -1, -5, 0, -0, 1e12, 1e308, -1e308, 2 ** 53 + 1, 0.1 + 0.2, 'NaN', 'Infinity', '-Infinity', '1e999', '-1', '0x10',
      '', ' ', '\u0000', 'a\u0000b', ...SURROGATES, '\u202e\u0301', '﷽', '../../../../etc/passwd', '..%2f..%2f', '%00', '/',
      '__proto__', 'constructor', 'null', null, true, false, [], {}, [[]], { '': '' }, '{"a":1}', '<|endoftext|>', 'a <|im_start|>b',
    ),
    fc.string({ unit: 'grapheme', maxLength: 40 }),
    fc.string({ unit: 'binary', maxLength: 40 }),
    fc.double(),
    fc.integer(),
    fc.constantFrom(16, 4096, 70_000).map((n) => 'A'.repeat(n)),
    fc.constantFrom(100, 5_000).map((n) => Array.from({ length: n }, (_, i) => i)),
    fc.constantFrom(65, 200, 2_000).map((n) => nest(n)),
  );
}

function nest(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = i % 2 ? { a: v } : [v];
  return v;
}

/** Mostly-valid values for a JSON Schema (enums, bounds, required fields), so requests get past the first check. */
export function valueFor(schema: JsonSchema | undefined, ctx: FuzzContext, depth = 0): fc.Arbitrary<unknown> {
  if (!schema || depth > 6) return fc.constant('x');
  if (typeof schema.$ref === 'string') return valueFor(ctx.resolve?.(schema, schema.$ref), ctx, depth + 1);
  if ('const' in schema) return fc.constant(schema.const);
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  if (Array.isArray(schema.examples) && schema.examples.length && depth > 0) return fc.constantFrom(...(schema.examples as unknown[]));
  for (const key of ['oneOf', 'anyOf'] as const)
    if (Array.isArray(schema[key])) return fc.oneof(...(schema[key] as JsonSchema[]).map((s) => valueFor({ ...schema, [key]: undefined, ...s }, ctx, depth + 1)));
  if (Array.isArray(schema.allOf) && !schema.type && !schema.properties) return valueFor((schema.allOf as JsonSchema[])[0], ctx, depth + 1);
  const type = Array.isArray(schema.type) ? (schema.type as string[])[0] : (schema.type as string | undefined);
  switch (type ?? (schema.properties ? 'object' : undefined)) {
    case 'string': {
      const min = Number(schema.minLength ?? 0);
      const max = Math.max(min, Math.min(Number(schema.maxLength ?? 24), 64));
      if (schema.format === 'uri') return fc.constantFrom('https://example.com/a.png', 'http://127.0.0.1:1/x.png', 'data:image/png;base64,iVBORw0KGgo=');
      return fc.string({ minLength: min, maxLength: max }).map((s) => (s.length >= min ? s : s.padEnd(min, 'a')));
    }
    case 'integer': {
      const min = Number(schema.minimum ?? (typeof schema.exclusiveMinimum === 'number' ? schema.exclusiveMinimum + 1 : 0));
      const max = Number(schema.maximum ?? (typeof schema.exclusiveMaximum === 'number' ? schema.exclusiveMaximum - 1 : min + 100));
      return fc.integer({ min: Math.ceil(Math.max(min, -1e6)), max: Math.floor(Math.min(Math.max(max, min), 1e6)) });
    }
    case 'number': {
      const min = Number(schema.minimum ?? 0);
      const max = Number(schema.maximum ?? min + 100);
      return fc.double({ min: Math.max(min, -1e6), max: Math.min(Math.max(max, min), 1e6), noNaN: true });
    }
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array': {
      const min = Number(schema.minItems ?? 0);
      return fc.array(valueFor(schema.items as JsonSchema | undefined, ctx, depth + 1), { minLength: min, maxLength: Math.max(min, Math.min(Number(schema.maxItems ?? 3), 3)) });
    }
    case 'object': {
      const props = (schema.properties ?? {}) as Record<string, JsonSchema>;
      const required = new Set((schema.required as string[] | undefined) ?? []);
      const entries = Object.entries(props).filter(([name]) => required.has(name) || depth < 3);
      if (entries.length === 0) return fc.constant({});
      return fc.record(Object.fromEntries(entries.map(([name, s]) => [name, valueFor(s, ctx, depth + 1)])), {
        requiredKeys: entries.map(([name]) => name).filter((n) => required.has(n)),
      });
    }
    default:
      return fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.boolean());
  }
}

/** A valid-looking body, then (most of the time) one field made hostile, dropped, or an unknown one added. */
function bodyFor(schemas: JsonSchema[], ctx: FuzzContext): fc.Arbitrary<unknown> {
  const base = schemas.length ? fc.oneof(...schemas.map((s) => valueFor(s, ctx))) : fc.constant({});
  return fc.tuple(base, fc.nat(9), fc.string({ maxLength: 12 }), hostileValue(), fc.nat()).map(([value, how, name, hostile, pick]) => {
    if (how < 3 || value === null || typeof value !== 'object' || Array.isArray(value)) return how === 9 ? hostile : value;
    const copy = { ...(value as Record<string, unknown>) };
    const keys = Object.keys(copy);
    const key = keys.length ? keys[pick % keys.length] : name;
    if (how <= 6) copy[key] = hostile; // a known field, wrong
    else if (how === 7) delete copy[key]; // a required field, missing
    else copy[name || 'unknown_field'] = hostile; // a field nobody defined
    return copy;
  });
}

/** JSON text, sometimes broken on purpose (truncated, duplicate keys, prototype keys, not an object). */
function bodyText(value: unknown): fc.Arbitrary<string> {
  const text = safeStringify(value);
  return fc.oneof(
    { weight: 8, arbitrary: fc.constant(text) },
    { weight: 1, arbitrary: fc.nat({ max: Math.max(0, text.length - 1) }).map((n) => text.slice(0, n)) },
    { weight: 1, arbitrary: fc.constantFrom(`{"__proto__":{"x":1},${text.slice(1)}`, `{"constructor":{"prototype":{}},${text.slice(1)}`, text.replace(/^\{/, '{"model":"a","model":') ) },
    { weight: 1, arbitrary: fc.constantFrom('', 'null', '[]', '"text"', '1', '{', '{"a":}', '\u0000', `${'['.repeat(20000)}${']'.repeat(20000)}`) },
  );
}

function safeStringify(value: unknown): string {
  try {
    return JSON.stringify(value) ?? 'null';
  } catch {
    return '{}';
  }
}

/** A lone surrogate cannot be percent-encoded (nor sent: a URL is UTF-8), so it goes as U+FFFD. */
function safeEncode(value: string): string {
  return encodeURIComponent(value.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd'));
}

function pathValue(name: string, ctx: FuzzContext, auth: FuzzRoute['auth']): fc.Arbitrary<string> {
  const real = ctx.pathValues[`${auth}:${name}`] ?? ctx.pathValues[name] ?? [];
  const hostile = fc.oneof(
    fc.constantFrom('..', '%2e%2e', '..%2f..%2fetc%2fpasswd', '%00', 'a'.repeat(300), '%F0%9F%98%80', '%ED%A0%80', 'ADMIN', '-', '_', '00000000-0000-0000-0000-000000000000'),
    fc.string({ minLength: 1, maxLength: 20 }).map(safeEncode),
  );
  return real.length ? fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...real.map(encodeURIComponent)) }, { weight: 1, arbitrary: hostile }) : hostile;
}

/** Every request the fuzzer may send, for every route. */
export function requestArbitrary(routes: FuzzRoute[], ctx: FuzzContext): fc.Arbitrary<FuzzRequest> {
  return fc.oneof(
    ...routes.map((route) => ({
      weight: route.weight ?? 1,
      arbitrary: fc
        .record({
          params: fc.record(Object.fromEntries([...route.path.matchAll(/\{(\w+)\}/g)].map((m) => [m[1], pathValue(m[1], ctx, route.auth)]))),
          query: fc.array(fc.tuple(fc.constantFrom(...(route.query?.length ? route.query : ['x'])), fc.oneof(fc.string({ maxLength: 12 }), hostileValue().map(String))), { maxLength: 3 }),
          body: route.method === 'GET' || route.method === 'DELETE' ? fc.constant(undefined) : bodyFor(route.bodies, ctx).chain(bodyText),
          contentType: fc.oneof(
            { weight: 12, arbitrary: fc.constant(route.multipart ? 'multipart/form-data; boundary=fz' : 'application/json') },
            { weight: 1, arbitrary: fc.constantFrom('text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data', 'application/json; charset=utf-16', 'application/xml', '') },
          ),
          auth: fc.oneof({ weight: 12, arbitrary: fc.constant('right') }, { weight: 1, arbitrary: fc.constantFrom('none', 'garbage', 'other') }),
        })
        .map(({ params, query, body, contentType, auth }): FuzzRequest => {
          let path = route.path.replace(/\{(\w+)\}/g, (_, name: string) => params[name]);
          if (query.length) path += `?${query.map(([k, v]) => `${k}=${safeEncode(v)}`).join('&')}`;
          const headers: Record<string, string> = {};
          const token = route.auth === 'admin' ? ctx.adminToken : route.auth === 'trainer' ? (ctx.trainerToken ?? ctx.apiKey) : ctx.apiKey;
          if (auth === 'right') headers.authorization = `Bearer ${token}`;
          else if (auth === 'garbage') headers.authorization = 'Bearer atl_nope_nope';
          else if (auth === 'other') headers.authorization = `Bearer ${route.auth === 'admin' ? ctx.apiKey : ctx.adminToken}`;
          let text = body;
          if (route.multipart && text !== undefined)
            text = `--fz\r\ncontent-disposition: form-data; name="file"; filename="${text.slice(0, 20).replace(/["\r\n]/g, '')}.bin"\r\n\r\n${text}\r\n--fz--\r\n`;
          if (text !== undefined && contentType) headers['content-type'] = contentType;
          return { method: route.method, path, headers, body: text, route: `${route.method} ${route.path}` };
        }),
    })),
  );
}

/** A multipart body as the fuzzer's multipart mode sends it, described so it can be written piece by piece. */
export interface MultipartShape {
  parts: { name: string; filename?: string; contentType?: string; size: number; fill: number }[];
  /** The body ends without its closing boundary. */
  cutShort: boolean;
}

const PART_NAMES = ['image', 'image[]', 'mask', 'file', 'files[]', 'prompt', 'model', 'n', 'size', 'response_format'];
const FILENAMES = ['a.png', 'photo.jpg', '../../etc/passwd', '..%2Fsecret.txt', 'x'.repeat(300), '', 'ü.png', 'a"b.png'];

/**
 * Many parts and big parts: up to 60 parts, mostly small, some of 1 KiB-1 MiB, a few of 1-48 MiB,
 * all together at most `maxTotalBytes`; fields and files under names the routes read and others.
 */
export function multipartArbitrary(maxTotalBytes: number): fc.Arbitrary<MultipartShape> {
  const size = fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: 100 }) },
    { weight: 3, arbitrary: fc.integer({ min: 1024, max: 1 << 20 }) },
    { weight: 1, arbitrary: fc.integer({ min: 1 << 20, max: 48 << 20 }) },
  );
  const part = fc.record({
    name: fc.oneof({ weight: 5, arbitrary: fc.constantFrom(...PART_NAMES) }, { weight: 1, arbitrary: fc.string({ maxLength: 12 }).map((n) => n.replace(/["\r\n]/g, '')) }),
    filename: fc.option(fc.constantFrom(...FILENAMES), { nil: undefined, freq: 3 }),
    contentType: fc.option(fc.constantFrom('image/png', 'application/octet-stream', 'text/plain', 'video/mp4'), { nil: undefined }),
    size,
    fill: fc.integer({ min: 0, max: 255 }),
  });
  return fc.record({ parts: fc.array(part, { maxLength: 60 }), cutShort: fc.boolean() }).map((shape) => {
    let room = maxTotalBytes;
    for (const p of shape.parts) {
      p.size = Math.min(p.size, room);
      room -= p.size;
    }
    return shape;
  });
}

/** A MultipartShape's bytes, in pieces of at most 1 MiB (one reused buffer per part), so no body is ever held whole. */
export function* multipartPieces(shape: MultipartShape, boundary: string): Generator<Buffer | string> {
  for (const p of shape.parts) {
    const disposition = `form-data; name="${p.name}"${p.filename === undefined ? '' : `; filename="${p.filename.replace(/"/g, '%22')}"`}`;
    yield `--${boundary}\r\ncontent-disposition: ${disposition}\r\n${p.contentType ? `content-type: ${p.contentType}\r\n` : ''}\r\n`;
    const piece = Buffer.alloc(Math.min(p.size, 1 << 20), p.fill);
    for (let left = p.size; left > 0; left -= piece.length) yield left >= piece.length ? piece : piece.subarray(0, left);
    yield '\r\n';
  }
  if (!shape.cutShort) yield `--${boundary}--\r\n`;
}

/**
 * Text no answer may carry: the names of the libraries atelier runs on (their error messages
 * name them, e.g. ioredis's "maxRetriesPerRequest") and stack frames.
 */
const INTERNAL_TEXT = /\b(ioredis|prisma|bullmq|fastify|node_modules|pg-pool|pg-protocol|maxRetriesPerRequest)\b|\n\s*at \S[^\n]*:\d+:\d+/i;

/** What internal text an error answer gives away, or undefined. */
export function internalTextProblem(text: string): string | undefined {
  const m = INTERNAL_TEXT.exec(text);
  return m ? `the answer carries internal text (${JSON.stringify(m[0].trim())})` : undefined;
}

const ANTHROPIC_ERROR_TYPES = new Set(['invalid_request_error', 'authentication_error', 'billing_error', 'permission_error', 'not_found_error', 'request_too_large', 'rate_limit_error', 'api_error', 'overloaded_error', 'timeout_error']);

/**
 * The one error envelope every 4xx/5xx must have (under /api/anthropic/, Anthropic's, which its
 * SDK and Claude Code parse); returns what is wrong, or undefined.
 */
export function envelopeProblem(status: number, contentType: string | null, text: string, path = ''): string | undefined {
  if (status < 400) return undefined;
  if (!contentType?.includes('application/json')) return `error without a JSON body (content-type ${contentType})`;
  let body: { type?: unknown; request_id?: unknown; error?: { type?: unknown; title?: unknown; message?: unknown }; status?: unknown; status_message?: unknown };
  try {
    body = JSON.parse(text);
  } catch {
    return 'error body is not JSON';
  }
  const e = body.error;
  if (path.startsWith('/api/anthropic/')) {
    if (body.type !== 'error' || typeof body.request_id !== 'string') return "not Anthropic's envelope (type: error, request_id)";
    if (!e || !ANTHROPIC_ERROR_TYPES.has(e.type as string) || typeof e.message !== 'string') return "error.type/message missing or not one of Anthropic's types";
    return undefined;
  }
  if (!e || typeof e.type !== 'string' || typeof e.title !== 'string' || typeof e.message !== 'string') return 'error.type/title/message missing';
  if (body.status !== 'error' || body.status_message !== e.type) return 'status/status_message do not match the envelope';
  return undefined;
}

export { fc };
