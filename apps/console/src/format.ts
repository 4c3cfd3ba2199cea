// Presentation only: numbers, money and times as people read them.

export const credits = (value: string | number | null | undefined) => (value === null || value === undefined ? '–' : Number(value).toLocaleString(undefined, { maximumFractionDigits: 6 }));

export function when(value: number | string | null | undefined): string {
  if (value === null || value === undefined) return '–';
  const date = typeof value === 'number' ? new Date(value * 1000) : new Date(value);
  return date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

export const percent = (part: number, whole: number) => (whole > 0 ? Math.min(100, Math.round((100 * part) / whole)) : 0);
