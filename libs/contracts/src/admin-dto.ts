import { z } from 'zod';

/** Names double as namespace names and URL path segments, so keep them URL-safe. */
export const NAME_PATTERN = /^[a-z0-9](?:[a-z0-9_-]{0,38}[a-z0-9])?$/;
const name = (what: string) =>
  z
    .string({ error: `${what} must be a string` })
    .regex(NAME_PATTERN, `${what} must be 1-40 lowercase letters, digits, '-' or '_', starting and ending with a letter or digit`);

/** Credits as an exact decimal: JSON numbers or decimal strings, at most 6 decimal places. */
export const DECIMAL_PATTERN = /^-?\d{1,14}(\.\d{1,6})?$/;
const decimal = (what: string) =>
  z
    .union([z.number({ error: `${what} must be a number` }), z.string()], { error: `${what} must be a number` })
    .transform((v) => (typeof v === 'number' ? numberToDecimalString(v) : v.trim()))
    .refine((v) => DECIMAL_PATTERN.test(v), `${what} must be a decimal number with at most 6 decimal places`);

function numberToDecimalString(n: number): string {
  if (!Number.isFinite(n)) return 'NaN';
  // toFixed would round silently; a plain toString keeps what the client meant unless it is exponential.
  const s = String(n);
  return /e/i.test(s) ? n.toFixed(6) : s;
}

export const CreateUserRequest = z.strictObject({
  username: name('username'),
  credits: decimal('credits').refine((v) => !v.startsWith('-'), 'credits must not be negative').optional(),
});
export type CreateUserRequest = z.infer<typeof CreateUserRequest>;

export const CreateOrgRequest = z.strictObject({
  name: name('name'),
  members: z.array(name('members[]'), { error: 'members must be an array of usernames' }).default([]),
  credits: decimal('credits').refine((v) => !v.startsWith('-'), 'credits must not be negative').optional(),
});
export type CreateOrgRequest = z.infer<typeof CreateOrgRequest>;

export const AdjustCreditsRequest = z.strictObject({
  amount: decimal('amount').refine((v) => !/^-?0+(\.0+)?$/.test(v), 'amount must not be zero'),
});
export type AdjustCreditsRequest = z.infer<typeof AdjustCreditsRequest>;

/** PUT /api/admin/namespaces/{ns}/limits: what every key billing to the namespace may do together (null: no limit). */
export const NamespaceLimitsRequest = z
  .strictObject({
    rpm: z.number({ error: 'rpm must be an integer or null' }).int('rpm must be an integer').min(1, 'rpm must be at least 1').max(1_000_000, 'rpm must be at most 1000000').nullable().optional(),
    read_rpm: z
      .number({ error: 'read_rpm must be an integer or null' })
      .int('read_rpm must be an integer')
      .min(1, 'read_rpm must be at least 1')
      .max(1_000_000, 'read_rpm must be at most 1000000')
      .nullable()
      .optional(),
    tpm: z.number({ error: 'tpm must be an integer or null' }).int('tpm must be an integer').min(1, 'tpm must be at least 1').max(1_000_000_000, 'tpm must be at most 1000000000').nullable().optional(),
    max_concurrent: z
      .number({ error: 'max_concurrent must be an integer or null' })
      .int('max_concurrent must be an integer')
      .min(1, 'max_concurrent must be at least 1')
      .max(100_000, 'max_concurrent must be at most 100000')
      .nullable()
      .optional(),
    queue_weight: z
      .number({ error: 'queue_weight must be an integer or null' })
      .int('queue_weight must be an integer')
      .min(1, 'queue_weight must be at least 1')
      .max(100, 'queue_weight must be at most 100')
      .nullable()
      .optional(),
    capture_rate: z
      .number({ error: 'capture_rate must be a number from 0 to 1, or null' })
      .min(0, 'capture_rate must be at least 0')
      .max(1, 'capture_rate must be at most 1')
      .nullable()
      .optional()
      .describe('Share of chat completions billed here that are stored without store: true (store: false and keys that refuse storing always win)'),
  })
  .refine(
    (l) => l.rpm !== undefined || l.read_rpm !== undefined || l.tpm !== undefined || l.max_concurrent !== undefined || l.queue_weight !== undefined || l.capture_rate !== undefined,
    'give rpm, read_rpm, tpm, max_concurrent, queue_weight, capture_rate or several (null removes a limit)',
  );
export type NamespaceLimitsRequest = z.infer<typeof NamespaceLimitsRequest>;

export interface CreatedUserResponse {
  username: string;
  namespace: string;
  api_key: string;
}
export interface CreatedApiKeyResponse {
  api_key: string;
  prefix: string;
  [field: string]: unknown;
}
export interface CreatedOrgResponse {
  name: string;
  namespace: string;
  members: string[];
  credits: string;
}
export interface NamespaceResponse {
  namespace: string;
  type: 'user' | 'org';
  credits: string;
  reserved: string;
}

/** POST /api/console/session: sign in to the console with an API key, the admin token, or both. */
export const ConsoleSignInRequest = z
  .strictObject({
    api_key: z.string({ error: 'api_key must be a string' }).min(1, 'api_key must not be empty').max(512, 'api_key is too long').optional(),
    admin_token: z.string({ error: 'admin_token must be a string' }).min(1, 'admin_token must not be empty').max(512, 'admin_token is too long').optional(),
  })
  .refine((b) => b.api_key !== undefined || b.admin_token !== undefined, 'Send api_key, admin_token or both');
export type ConsoleSignInRequest = z.infer<typeof ConsoleSignInRequest>;
