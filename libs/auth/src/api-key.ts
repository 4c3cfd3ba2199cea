import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

const KEY_PATTERN = /^atl_([a-z0-9]{12})_([A-Za-z0-9_-]{43})$/;

export interface GeneratedApiKey {
  /** Shown to the user once; never stored. */
  key: string;
  /** Public identifier, safe to log and list; used to revoke. */
  prefix: string;
  hash: string;
}

export function hashApiKey(key: string): string {
  // One-shot crypto.hash: a third of createHash's cost for a string this short (one per request).
  return hash('sha256', key, 'hex');
}

/** 256 random bits: a fast hash is enough because keys cannot be guessed from a dictionary. */
export function generateApiKey(): GeneratedApiKey {
  const prefix = randomBytes(9).toString('base64url').toLowerCase().replace(/[^a-z0-9]/g, '0').slice(0, 12).padEnd(12, '0');
  const key = `atl_${prefix}_${randomBytes(32).toString('base64url')}`;
  return { key, prefix, hash: hashApiKey(key) };
}

/** The prefix of a well-formed key, or undefined for anything that cannot be an atelier key. */
export function apiKeyPrefix(key: string): string | undefined {
  return KEY_PATTERN.exec(key)?.[1];
}

export function hashesEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'hex');
  const bb = Buffer.from(b, 'hex');
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}

/** Constant-time comparison of two secrets of any length. */
export function secretsEqual(given: string, expected: string): boolean {
  return hashesEqual(hashApiKey(given), hashApiKey(expected));
}

/**
 * A request's API key credentials, as an Authorization value: `Authorization: Bearer <key>`, or,
 * when that header is absent, `x-api-key: <key>` (what Anthropic's SDK and Claude Code send with
 * ANTHROPIC_API_KEY). The same keys either way; a header sent twice stays an array, refused.
 */
export function keyCredentials(headers: { authorization?: string | string[]; 'x-api-key'?: string | string[] }): string | string[] | undefined {
  if (headers.authorization !== undefined) return headers.authorization;
  const key = headers['x-api-key'];
  return typeof key === 'string' ? `Bearer ${key}` : key;
}
