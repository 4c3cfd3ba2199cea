import type { JsonSchema, JsonSchemaObject, JsonValue } from '@atelier/models';
import { compileUserSchema, firstSchemaError } from '../user-schema';
import { samplePattern } from './pattern-sampler';
import type { Rng } from './rng';

export interface SamplerContext {
  rng: Rng;
  /** Words from the conversation, preferred for string values (e.g. the city a weather tool needs). */
  hints: string[];
  /** A short generated phrase, for strings the conversation gives nothing for. */
  phrase: () => string;
}

export class SchemaSamplingError extends Error {}

const MAX_DEPTH = 8;
const ATTEMPTS = 8;

/**
 * Produces a value valid against a JSON Schema: a few attempts at generating one from the
 * schema's keywords, each checked with Ajv. Keywords the generator does not model (not,
 * if/then, dependentSchemas, ...) are handled by that check: an invalid candidate is retried
 * with other random choices and, failing that, reported rather than returned.
 */
export function sampleSchemaValue(schema: JsonSchemaObject, ctx: SamplerContext): JsonValue {
  const validate = compileUserSchema(schema);
  let lastError = '';
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const value = new Sampler(schema, ctx, attempt).value(schema, 0, '');
    if (validate(value)) return value;
    lastError = firstSchemaError(validate);
  }
  throw new SchemaSamplingError(lastError);
}

class Sampler {
  private hintIndex = 0;

  constructor(
    private readonly root: JsonSchemaObject,
    private readonly ctx: SamplerContext,
    private readonly attempt: number,
  ) {}

  value(schema: JsonSchema, depth: number, name: string): JsonValue {
    if (schema === true || schema === undefined) return this.string({}, name);
    if (schema === false) return null;
    const s = this.resolve(schema);
    if (s.const !== undefined) return s.const;
    if (s.enum !== undefined && s.enum.length > 0) return s.enum[this.int(0, s.enum.length - 1)];
    if (s.default !== undefined && this.attempt === 0 && depth > 0) return s.default;
    const alternatives = s.anyOf ?? s.oneOf;
    if (alternatives && alternatives.length > 0) {
      // Later attempts walk through the branches, so a branch that cannot be satisfied is skipped.
      const branch = alternatives[(this.attempt + this.int(0, alternatives.length - 1)) % alternatives.length];
      return this.value(this.merge(s, branch, ['anyOf', 'oneOf']), depth, name);
    }
    if (s.allOf && s.allOf.length > 0) {
      let merged: JsonSchemaObject = { ...s, allOf: undefined };
      for (const part of s.allOf) merged = this.merge(merged, part, []);
      return this.value(merged, depth, name);
    }
    const type = this.type(s);
    if (depth >= MAX_DEPTH && (type === 'object' || type === 'array')) return type === 'object' ? {} : [];
    switch (type) {
      case 'null':
        return null;
      case 'boolean':
        return this.ctx.rng() < 0.5;
      case 'integer':
        return this.number(s, true);
      case 'number':
        return this.number(s, false);
      case 'array':
        return this.array(s, depth);
      case 'object':
        return this.object(s, depth);
      default:
        return this.string(s, name);
    }
  }

  private resolve(schema: JsonSchemaObject): JsonSchemaObject {
    let s = schema;
    for (let hops = 0; s.$ref !== undefined && hops < 16; hops++) {
      const target = this.pointer(s.$ref);
      const { $ref: _ref, ...rest } = s;
      s = { ...(typeof target === 'object' ? target : {}), ...rest };
    }
    return s;
  }

  private pointer(ref: string): JsonSchema | undefined {
    if (!ref.startsWith('#')) return undefined;
    let node: unknown = this.root;
    for (const raw of ref.slice(1).split('/').filter(Boolean)) {
      const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
      node = node && typeof node === 'object' ? (node as Record<string, unknown>)[key] : undefined;
    }
    return node as JsonSchema | undefined;
  }

  private merge(base: JsonSchemaObject, extra: JsonSchema, drop: string[]): JsonSchemaObject {
    const out: JsonSchemaObject = { ...base };
    for (const key of drop) delete out[key];
    if (typeof extra !== 'object') return out;
    const e = this.resolve(extra);
    for (const [k, v] of Object.entries(e)) {
      if (k === 'properties') out.properties = { ...(out.properties ?? {}), ...(v as Record<string, JsonSchema>) };
      else if (k === 'required') out.required = [...new Set([...(out.required ?? []), ...(v as string[])])];
      else if (out[k] === undefined) out[k] = v;
    }
    return out;
  }

  private type(s: JsonSchemaObject): string {
    if (Array.isArray(s.type)) {
      const concrete = s.type.filter((t) => t !== 'null');
      return concrete.length > 0 ? concrete[this.int(0, concrete.length - 1)] : 'null';
    }
    if (s.type !== undefined) return s.type;
    if (s.properties !== undefined || s.required !== undefined) return 'object';
    if (s.items !== undefined || s.prefixItems !== undefined) return 'array';
    if (s.minimum !== undefined || s.maximum !== undefined) return 'number';
    return 'string';
  }

  private int(min: number, max: number): number {
    return min + Math.floor(this.ctx.rng() * (max - min + 1));
  }

  private number(s: JsonSchemaObject, integer: boolean): number {
    const exMin = typeof s.exclusiveMinimum === 'number' ? s.exclusiveMinimum : undefined;
    const exMax = typeof s.exclusiveMaximum === 'number' ? s.exclusiveMaximum : undefined;
    let lo = s.minimum ?? (exMin !== undefined ? exMin + (integer ? 1 : 1e-6) : undefined);
    let hi = s.maximum ?? (exMax !== undefined ? exMax - (integer ? 1 : 1e-6) : undefined);
    if (lo === undefined && hi === undefined) [lo, hi] = [0, 100];
    else if (lo === undefined) lo = (hi as number) - 100;
    else if (hi === undefined) hi = lo + 100;
    const [min, max] = [lo as number, hi as number];
    const step = typeof s.multipleOf === 'number' && s.multipleOf > 0 ? s.multipleOf : integer ? 1 : undefined;
    if (step !== undefined) {
      const first = Math.ceil(min / step);
      const last = Math.floor(max / step);
      if (last < first) return first * step;
      return Number((this.int(first, last) * step).toPrecision(12));
    }
    return Math.round((min + this.ctx.rng() * (max - min)) * 100) / 100;
  }

  private array(s: JsonSchemaObject, depth: number): JsonValue[] {
    const prefix = Array.isArray(s.prefixItems) ? (s.prefixItems as JsonSchema[]) : [];
    const min = Math.max(s.minItems ?? 1, prefix.length);
    const max = Math.max(min, Math.min(s.maxItems ?? min + 2, min + 2));
    const count = this.int(min, max);
    const out: JsonValue[] = [];
    const seen = new Set<string>();
    for (let i = 0, tries = 0; out.length < count && tries < count * 5; tries++, i = out.length) {
      const item = this.value(i < prefix.length ? prefix[i] : ((s.items as JsonSchema | undefined) ?? {}), depth + 1, '');
      const key = JSON.stringify(item);
      if (s.uniqueItems && seen.has(key)) continue;
      seen.add(key);
      out.push(item);
    }
    return out;
  }

  private object(s: JsonSchemaObject, depth: number): Record<string, JsonValue> {
    const out: Record<string, JsonValue> = {};
    const properties = s.properties ?? {};
    const required = new Set(s.required ?? []);
    for (const [key, schema] of Object.entries(properties)) {
      // Optional properties are included on the first attempt (a fuller answer) and dropped on
      // later ones, in case one of them is what makes the object invalid.
      if (!required.has(key) && this.attempt > 1 && this.ctx.rng() < 0.5) continue;
      out[key] = this.value(schema, depth + 1, key);
    }
    for (const key of required) if (!(key in out)) out[key] = this.value({}, depth + 1, key);
    const minProps = s.minProperties as number | undefined;
    if (minProps !== undefined && s.additionalProperties !== false) {
      const extra = typeof s.additionalProperties === 'object' ? s.additionalProperties : {};
      for (let k = 1; Object.keys(out).length < minProps; k++) out[`field_${k}`] = this.value(extra, depth + 1, '');
    }
    return out;
  }

  private string(s: JsonSchemaObject, name: string): string {
    let text: string;
    if (typeof s.pattern === 'string') text = samplePattern(s.pattern, this.ctx.rng);
    else if (typeof s.format === 'string') text = this.formatted(s.format) ?? this.words(name);
    else text = this.words(name);
    const min = s.minLength ?? 0;
    const max = s.maxLength ?? Number.MAX_SAFE_INTEGER;
    while ([...text].length < min) text += text.length > 0 ? text : 'x';
    if ([...text].length > max) text = [...text].slice(0, max).join('');
    return text;
  }

  private words(name: string): string {
    const hints = this.ctx.hints;
    if (hints.length > 0 && this.hintIndex < hints.length && this.attempt < ATTEMPTS - 1) return hints[this.hintIndex++];
    const phrase = this.ctx.phrase();
    return phrase || name || 'value';
  }

  private formatted(format: string): string | undefined {
    const r = this.ctx.rng;
    const two = (n: number) => String(n).padStart(2, '0');
    const date = `20${two(20 + Math.floor(r() * 10))}-${two(1 + Math.floor(r() * 12))}-${two(1 + Math.floor(r() * 28))}`;
    const time = `${two(Math.floor(r() * 24))}:${two(Math.floor(r() * 60))}:${two(Math.floor(r() * 60))}`;
    const hex = (n: number) => Array.from({ length: n }, () => '0123456789abcdef'[Math.floor(r() * 16)]).join('');
    switch (format) {
      case 'date-time':
        return `${date}T${time}Z`;
      case 'date':
        return date;
      case 'time':
        return `${time}Z`;
      case 'email':
        return `alice${Math.floor(r() * 1000)}@example.com`;
      case 'uri':
      case 'url':
      case 'iri':
        return `https://example.com/${hex(8)}`;
      case 'uri-reference':
        return `/items/${hex(8)}`;
      case 'hostname':
        return `host-${hex(6)}.example.com`;
      case 'uuid':
        return `${hex(8)}-${hex(4)}-4${hex(3)}-a${hex(3)}-${hex(12)}`;
      case 'ipv4':
        return `192.0.2.${1 + Math.floor(r() * 254)}`;
      case 'ipv6':
        return `2001:db8::${hex(4)}`;
      case 'duration':
        return `PT${1 + Math.floor(r() * 59)}M`;
      default:
        return undefined;
    }
  }
}
