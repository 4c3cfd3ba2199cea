/** The latest instant JavaScript's Date can hold (ms since the epoch). */
const MAX_MS = 8.64e15;
const ISO = /^\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)?$/;

/**
 * An instant as the API takes it: Unix seconds (a JSON number, or digits in a query string) or
 * an ISO 8601 time or date (a date alone is its UTC midnight). Undefined for anything else, and
 * for instants before 1970 or past what a Date holds. The one reading of "ISO 8601 or Unix
 * seconds" (key `expires_at`, usage `from`/`to`).
 */
export function parseApiInstant(value: unknown): Date | undefined {
  let ms: number;
  if (typeof value === 'number') ms = value * 1000;
  else if (typeof value === 'string' && /^\d{1,12}$/.test(value)) ms = Number(value) * 1000;
  else if (typeof value === 'string' && ISO.test(value)) ms = Date.parse(/^\d{4}-\d\d-\d\d$/.test(value) ? `${value}T00:00:00Z` : value);
  else return undefined;
  return Number.isFinite(ms) && ms >= 0 && ms <= MAX_MS ? new Date(ms) : undefined;
}
