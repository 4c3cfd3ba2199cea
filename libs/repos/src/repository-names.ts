import { ApiError } from '@atelier/contracts';

/** Repository and branch names appear in URLs and in `resource` references, so keep them plain. */
export const REPO_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
export const BRANCH_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
export const DEFAULT_BRANCH = 'main';

const MAX_PATH_LENGTH = 1024;
const MAX_SEGMENT_LENGTH = 255;
// Control characters and backslashes make paths ambiguous across platforms and in headers.
const BAD_SEGMENT_CHARS = /[\u0000-\u001f\u007f\\]/;

export function assertRepoName(name: string): void {
  if (!REPO_NAME_PATTERN.test(name) || name.endsWith('.git'))
    throw ApiError.badRequest(
      `Repository name '${name}' is invalid: use 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit`,
    );
}

export function assertBranchName(name: string): void {
  if (!BRANCH_NAME_PATTERN.test(name))
    throw ApiError.badRequest(`Branch name '${name}' is invalid: use 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit`);
}

/**
 * Splits a slash-separated path from a URL or a form field into checked segments. Empty
 * segments (leading, trailing or doubled slashes) are dropped; `.` and `..` are refused so a
 * path always names exactly one place inside the repository.
 */
export function pathSegments(raw: string, what = 'path'): string[] {
  const segments = raw.split('/').filter((s) => s !== '');
  for (const segment of segments) {
    if (segment === '.' || segment === '..') throw ApiError.badRequest(`The ${what} must not contain '.' or '..' segments`);
    if (segment.length > MAX_SEGMENT_LENGTH) throw ApiError.badRequest(`A ${what} segment is longer than ${MAX_SEGMENT_LENGTH} characters`);
    if (BAD_SEGMENT_CHARS.test(segment)) throw ApiError.badRequest(`The ${what} contains control characters or backslashes`);
  }
  if (segments.join('/').length > MAX_PATH_LENGTH) throw ApiError.badRequest(`The ${what} is longer than ${MAX_PATH_LENGTH} characters`);
  return segments;
}

/** A file's path in the repository: directory (may be empty = root) plus the uploaded file name. */
export function filePath(directory: string[], filename: string): string {
  if (!filename || filename.includes('/')) throw ApiError.badRequest(`Invalid file name '${filename}': it must not be empty or contain '/'`);
  const [name] = pathSegments(filename, 'file name');
  if (!name) throw ApiError.badRequest(`Invalid file name '${filename}'`);
  const path = [...directory, name].join('/');
  if (path.length > MAX_PATH_LENGTH) throw ApiError.badRequest(`The file path is longer than ${MAX_PATH_LENGTH} characters`);
  return path;
}

const CONTENT_TYPES: Record<string, string> = {
  parquet: 'application/vnd.apache.parquet',
  json: 'application/json',
  jsonl: 'application/jsonl',
  csv: 'text/csv',
  txt: 'text/plain',
  md: 'text/markdown',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  webp: 'image/webp',
  gif: 'image/gif',
  mp4: 'video/mp4',
};

/** The declared type unless it says nothing (octet-stream), else a guess from the extension. */
export function contentTypeFor(path: string, declared: string | undefined): string {
  if (declared && declared !== 'application/octet-stream') return declared;
  const ext = /\.([A-Za-z0-9]+)$/.exec(path)?.[1]?.toLowerCase();
  return (ext && CONTENT_TYPES[ext]) ?? 'application/octet-stream';
}
