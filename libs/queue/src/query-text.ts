import { ApiError } from '@atelier/contracts';

/** An optional text parameter (a query's or a body's): absent or '' is undefined; anything but one string is a 400. */
export function optionalText(value: unknown, name: string): string | undefined {
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string') throw ApiError.badRequest(`${name} must be given once, as a string`);
  return value;
}
