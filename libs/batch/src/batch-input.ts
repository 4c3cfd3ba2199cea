import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { batchEndpoint, type BatchEndpoint } from '@atelier/contracts';

/** Most lines one batch input may hold (OpenAI's limit). */
export const MAX_BATCH_LINES = 50_000;
/** Longest custom_id kept (OpenAI's limit). */
const MAX_CUSTOM_ID = 512;
/** A bad file lists at most this many of its problems. */
const MAX_LISTED_ERRORS = 100;

/** One problem of a batch's input file, as the batch object's `errors.data` lists it. */
export interface BatchInputError {
  code: string;
  message: string;
  /** 1-based. */
  line: number;
  param: string | null;
}

export interface BatchInputCheck {
  /** Lines read (blank ones are skipped, as OpenAI does). */
  lines: number;
  /** The models the lines name, each with how many lines name it (for the estimate and the key's access). */
  models: Map<string, number>;
  /** Empty: the file is good. Otherwise the batch fails with these (the first MAX_LISTED_ERRORS). */
  errors: BatchInputError[];
}

/**
 * Reads a batch's input file as a stream, a line at a time (a 200 MB file is never held whole):
 * every line must be a JSON object `{custom_id, method: "POST", url, body}` with a custom_id no
 * other line has, the batch's endpoint as its url, and a body naming a model `knownModel` accepts.
 * Those are the file's problems, which fail the batch; what a body asks of its model is checked
 * when the line runs, and fails that line only.
 */
export async function checkBatchInput(input: Readable, endpoint: BatchEndpoint, knownModel: (model: string) => boolean): Promise<BatchInputCheck> {
  const check: BatchInputCheck = { lines: 0, models: new Map(), errors: [] };
  const seen = new Set<string>();
  let errorCount = 0;
  const fail = (line: number, code: string, message: string, param: string | null = null) => {
    errorCount++;
    if (check.errors.length < MAX_LISTED_ERRORS) check.errors.push({ code, message, line, param });
  };
  const reader = createInterface({ input, crlfDelay: Infinity });
  let n = 0;
  for await (const text of reader) {
    n++;
    if (text.trim() === '') continue;
    check.lines++;
    if (check.lines > MAX_BATCH_LINES) {
      fail(n, 'too_many_requests', `A batch may hold at most ${MAX_BATCH_LINES} requests`);
      input.destroy();
      break;
    }
    let line: unknown;
    try {
      line = JSON.parse(text);
    } catch {
      fail(n, 'invalid_json_line', `Line ${n} is not valid JSON`);
      continue;
    }
    if (line === null || typeof line !== 'object' || Array.isArray(line)) {
      fail(n, 'invalid_json_line', `Line ${n} is not a JSON object`);
      continue;
    }
    const { custom_id: customId, method, url, body } = line as Record<string, unknown>;
    if (typeof customId !== 'string' || customId === '' || customId.length > MAX_CUSTOM_ID)
      fail(n, 'missing_required_parameter', `Line ${n}: custom_id must be a string of 1 to ${MAX_CUSTOM_ID} characters`, 'custom_id');
    else if (seen.has(customId)) fail(n, 'duplicate_custom_id', `Line ${n}: custom_id '${customId}' is used by an earlier line`, 'custom_id');
    else seen.add(customId);
    if (method !== 'POST') fail(n, 'invalid_method', `Line ${n}: method must be POST`, 'method');
    if (batchEndpoint(url) !== endpoint) fail(n, 'mismatched_endpoint', `Line ${n}: url must be the batch's endpoint ${endpoint} (with or without /v1)`, 'url');
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      fail(n, 'missing_required_parameter', `Line ${n}: body must be a JSON object`, 'body');
      continue;
    }
    const model = (body as Record<string, unknown>).model;
    if (typeof model !== 'string' || model === '') fail(n, 'missing_required_parameter', `Line ${n}: body.model is required`, 'body.model');
    else if (!knownModel(model)) fail(n, 'model_not_found', `Line ${n}: model '${model}' does not exist or this key may not use it`, 'body.model');
    else check.models.set(model, (check.models.get(model) ?? 0) + 1);
  }
  if (check.lines === 0 && errorCount === 0) fail(1, 'empty_file', 'The input file has no requests');
  if (errorCount > check.errors.length)
    check.errors.push({ code: 'too_many_errors', message: `${errorCount - check.errors.length} more problems are not listed`, line: n, param: null });
  return check;
}
