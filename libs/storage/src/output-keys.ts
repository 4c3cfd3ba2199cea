import { ApiError } from '@atelier/contracts';
import { assertSafeKey } from './blob-store';

export interface OutputLocation {
  /** The billed namespace; every output lives under it. */
  namespace: string;
  /** target_repo: outputs go into the repository's files. */
  repo?: string;
  /** target_directory: a relative path inside the repository (or the namespace's outputs). */
  directory?: string;
}

const SEGMENT = /^[A-Za-z0-9._@=+-][A-Za-z0-9._@=+ -]{0,127}$/;

/** `a/b/` -> ['a', 'b']; refuses anything that could leave the namespace (`..`, absolute, odd characters). */
export function directorySegments(directory: string | undefined, what = 'target_directory'): string[] {
  if (directory === undefined) return [];
  const segments = directory.split('/').filter((s) => s !== '');
  if (directory.length > 512 || segments.some((s) => !SEGMENT.test(s) || s === '.' || s === '..'))
    throw ApiError.badRequest(`${what} must be a relative path of names made of letters, digits, '.', '_', '-', '@', '=', '+' or spaces`);
  return segments;
}

/**
 * Blob key of a generated file:
 * - `<namespace>/outputs/<yyyy>/<mm>/<dd>/<file>` by default,
 * - `<namespace>/outputs/<directory>/<file>` with only a target directory,
 * - `<namespace>/repos/<repo>/<directory>/<file>` with a target repository.
 */
export function outputKey(location: OutputLocation, fileName: string, now = new Date()): string {
  const dir = directorySegments(location.directory);
  if (location.repo !== undefined && !SEGMENT.test(location.repo)) throw ApiError.badRequest('target_repo is not a valid repository name');
  let parts: string[];
  if (location.repo !== undefined) parts = [location.namespace, 'repos', location.repo, ...dir, fileName];
  else if (dir.length > 0) parts = [location.namespace, 'outputs', ...dir, fileName];
  else {
    const date = now.toISOString().slice(0, 10).split('-');
    parts = [location.namespace, 'outputs', ...date, fileName];
  }
  const key = parts.join('/');
  assertSafeKey(key);
  return key;
}
