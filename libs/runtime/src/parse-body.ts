import { ApiError } from '@atelier/contracts';
import type { z } from 'zod';

/** Validates a request body against a contract schema; every problem becomes one 400 message. */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body))
    throw ApiError.badRequest('Request body must be a JSON object');
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const problems = result.error.issues.map((i) => {
    if (i.code === 'unrecognized_keys') return `unknown field(s): ${i.keys.join(', ')}`;
    return i.message;
  });
  throw ApiError.badRequest(problems.join('; '), { fields: result.error.issues.map((i) => ({ field: i.path.join('.'), message: i.message })) });
}
