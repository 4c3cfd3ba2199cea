import dns from 'node:dns';
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { ApiError } from '@atelier/contracts';
import { blockedRange, isAllowedHost, isIpLiteral } from './address-policy';
import { effectiveType, essence, matchesAccept } from './media-type';

export interface FetchMediaOptions {
  /** Largest body accepted (default 50 MiB); checked against Content-Length and while streaming. */
  maxBytes?: number;
  /** Bound on the whole fetch, redirects and body included (default 30 s). */
  timeoutMs?: number;
  /** Acceptable media types, e.g. `['image/*']`; default: anything. */
  accept?: readonly string[];
  /** Aborts the download (client went away, job cancelled). */
  signal?: AbortSignal;
  /** Hosts that may resolve to non-public addresses (MEDIA_FETCH_ALLOWED_HOSTS). */
  allowedHosts?: readonly string[];
  maxRedirects?: number;
  /** Names the input in messages, e.g. `input_image`. */
  label?: string;
}

export interface FetchedMedia {
  data: Buffer;
  /** The declared type, or the sniffed one when the server sent a generic/missing type. */
  contentType: string;
  /** Where the bytes finally came from (after redirects); the data URI's header for data URIs. */
  url: string;
}

export type MediaFetchFailure =
  | 'invalid_url'
  | 'blocked_address'
  | 'http_status'
  | 'too_many_redirects'
  | 'too_large'
  | 'content_type'
  | 'timeout'
  | 'network'
  | 'aborted';

/**
 * A fetch that failed because of the input (bad URL, unreachable, forbidden address, wrong
 * type, too large): a 400 in the one error envelope, with a message that names the URL.
 */
export class MediaFetchError extends ApiError {
  constructor(
    readonly reason: MediaFetchFailure,
    message: string,
    readonly url: string,
    readonly httpStatus?: number,
  ) {
    super('invalid_request', message, httpStatus === undefined ? { reason, url } : { reason, url, status: httpStatus });
    this.name = 'MediaFetchError';
  }
}

const DEFAULT_MAX_BYTES = 50 * 1024 * 1024;
const DEFAULT_TIMEOUT_MS = 30_000;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** Long data URIs would flood messages and logs; keep their header only. */
export function displayUrl(url: string): string {
  if (url.startsWith('data:')) return `${url.slice(0, Math.min(url.indexOf(',') + 1 || 40, 60))}...`;
  return url.length > 2048 ? `${url.slice(0, 2048)}...` : url;
}

/** The same wording Python's requests uses, which clients of the original API already match on. */
export function httpStatusMessage(status: number, url: string, reason?: string): string {
  const kind = status >= 500 ? 'Server Error' : 'Client Error';
  return `${status} ${kind}: ${reason || http.STATUS_CODES[status] || 'Unknown'} for url: ${url}`;
}

/**
 * Downloads input media from an http(s) URL or decodes a data URI, refusing anything that
 * could reach inside the network: every hop's host is resolved and each address checked
 * before connecting (the connection uses exactly the checked address, so DNS cannot change
 * its answer in between), redirects included, unless the host is explicitly allowed.
 */
export async function fetchMedia(url: string, opts: FetchMediaOptions = {}): Promise<FetchedMedia> {
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_BYTES;
  const what = opts.label ?? 'media';
  if (typeof url !== 'string' || url.trim() === '') throw new MediaFetchError('invalid_url', `${what} must be a URL or a data URI`, String(url));
  if (url.startsWith('data:')) return checkType(decodeDataUri(url, maxBytes, what), opts, what);

  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
  try {
    let current = parseHttpUrl(url, what);
    for (let hop = 0; ; hop++) {
      const res = await requestOnce(current, opts.allowedHosts ?? [], signal);
      if (REDIRECTS.has(res.statusCode ?? 0) && res.headers.location) {
        res.resume();
        if (hop >= (opts.maxRedirects ?? 5))
          throw new MediaFetchError('too_many_redirects', `Too many redirects fetching ${displayUrl(url)}`, url);
        current = parseHttpUrl(new URL(res.headers.location, current).toString(), what);
        continue;
      }
      const status = res.statusCode ?? 0;
      if (status < 200 || status >= 300) {
        res.resume();
        throw new MediaFetchError('http_status', httpStatusMessage(status, current.toString()), current.toString(), status);
      }
      const data = await readBody(res, maxBytes, current.toString());
      return checkType({ data, contentType: effectiveType(res.headers['content-type'], data), url: current.toString() }, opts, what);
    }
  } catch (err) {
    if (err instanceof MediaFetchError) throw err;
    if (opts.signal?.aborted) throw new MediaFetchError('aborted', `Fetching ${displayUrl(url)} was cancelled`, url);
    if (timeout.aborted) throw new MediaFetchError('timeout', `Timed out after ${timeoutMs} ms fetching ${displayUrl(url)}`, url);
    throw new MediaFetchError('network', `Could not fetch ${displayUrl(url)}: ${networkReason(err)}`, url);
  }
}

function parseHttpUrl(raw: string, what: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new MediaFetchError('invalid_url', `${what} is not a valid URL: ${displayUrl(raw)}`, raw);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new MediaFetchError('invalid_url', `${what} must be an http(s) URL or a data URI, got ${url.protocol} (${displayUrl(raw)})`, raw);
  if (url.username || url.password) throw new MediaFetchError('invalid_url', `${what} must not carry credentials in the URL`, raw);
  return url;
}

/** `post`: the refused request is a delivery (a webhook), not a fetch of input media. */
function blockedError(url: URL, address: string, range: string, post: boolean): MediaFetchError {
  const where = `${displayUrl(url.toString())}: ${url.hostname} resolves to ${address}, a ${range} address.`;
  return new MediaFetchError(
    'blocked_address',
    post
      ? `Refused: ${where} Webhook receivers must be publicly reachable (an operator can allow a host with MEDIA_FETCH_ALLOWED_HOSTS)`
      : `Refusing to fetch ${where} Input media must be publicly accessible (an operator can allow a host with MEDIA_FETCH_ALLOWED_HOSTS).`,
    url.toString(),
  );
}

/** A DNS lookup that refuses the host when any of its addresses is not public. */
function guardedLookup(url: URL, post: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { all: true, family: options.family, hints: options.hints }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const list = addresses as dns.LookupAddress[];
      for (const a of list) {
        const range = blockedRange(a.address);
        if (range) return callback(blockedError(url, a.address, range, post), '', 0);
      }
      if (list.length === 0) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
      if (options.all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, list);
      callback(null, list[0].address, list[0].family);
    });
  };
}

/** A POST instead of the GET (webhook deliveries): method, headers and body of the one request. */
interface RequestBody {
  headers: Record<string, string>;
  body: string;
}

function requestOnce(url: URL, allowedHosts: readonly string[], signal: AbortSignal, post?: RequestBody): Promise<IncomingMessage> {
  const allowed = isAllowedHost(url, allowedHosts);
  if (!allowed && isIpLiteral(url.hostname)) {
    const range = blockedRange(url.hostname);
    if (range) return Promise.reject(blockedError(url, url.hostname.replace(/^\[|\]$/g, ''), range, post !== undefined));
  }
  return new Promise((resolve, reject) => {
    const client = url.protocol === 'https:' ? https : http;
    const req = client.request(url, {
      method: post ? 'POST' : 'GET',
      // A fresh connection per fetch: a pooled socket would skip the address check of this hop.
      agent: false,
      signal,
      headers: post
        ? { 'content-length': String(Buffer.byteLength(post.body)), ...post.headers }
        : { 'user-agent': 'atelier-media-fetch/1', accept: '*/*', 'accept-encoding': 'identity' },
      ...(allowed ? {} : { lookup: guardedLookup(url, post !== undefined) }),
    });
    req.once('response', resolve);
    req.once('error', (err) => reject(err instanceof MediaFetchError ? err : ((err as { cause?: unknown }).cause instanceof MediaFetchError ? (err as { cause: MediaFetchError }).cause : err)));
    req.end(post?.body);
  });
}

export interface GuardedPostOptions {
  headers: Record<string, string>;
  body: string;
  /** Hosts (`host` or `host:port`) that may be reached although they are not public (MEDIA_FETCH_ALLOWED_HOSTS). */
  allowedHosts?: readonly string[];
  timeoutMs: number;
}

/**
 * One POST under the same address policy as media fetches (checked after DNS, on this very
 * connection); a redirect is not followed but answered as it is. Resolves with the status once
 * the answer's headers arrive (its body is read and dropped, at most 64 KiB); rejects with a
 * MediaFetchError for a refused address, a bad URL, a network error or the timeout.
 */
export async function guardedPost(url: string, opts: GuardedPostOptions): Promise<{ status: number }> {
  const target = parseHttpUrl(url, 'the URL');
  const timeout = AbortSignal.timeout(opts.timeoutMs);
  try {
    const res = await requestOnce(target, opts.allowedHosts ?? [], timeout, { headers: opts.headers, body: opts.body });
    let seen = 0;
    for await (const chunk of res as AsyncIterable<Buffer>) {
      seen += chunk.length;
      if (seen > 64 * 1024) {
        res.destroy();
        break;
      }
    }
    return { status: res.statusCode ?? 0 };
  } catch (err) {
    if (err instanceof MediaFetchError) throw err;
    if (timeout.aborted) throw new MediaFetchError('timeout', `No answer within ${opts.timeoutMs} ms from ${displayUrl(url)}`, url);
    throw new MediaFetchError('network', `Could not reach ${displayUrl(url)}: ${networkReason(err)}`, url);
  }
}

async function readBody(res: IncomingMessage, maxBytes: number, url: string): Promise<Buffer> {
  const tooLarge = () => new MediaFetchError('too_large', `${displayUrl(url)} is larger than the limit of ${maxBytes} bytes`, url);
  const declared = Number(res.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    res.destroy();
    throw tooLarge();
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) {
      res.destroy();
      throw tooLarge();
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
}

function decodeDataUri(uri: string, maxBytes: number, what: string): FetchedMedia {
  const comma = uri.indexOf(',');
  const header = comma > 0 ? uri.slice(5, comma) : '';
  if (comma < 0 || !/^[\w.+-]+\/[\w.+-]+(?:;[\w.+-]+=[^;,]+)*(?:;base64)?$|^(?:;base64)?$/i.test(header))
    throw new MediaFetchError('invalid_url', `${what} is not a valid data URI (expected data:<type>[;base64],<data>)`, displayUrl(uri));
  const base64 = /;base64$/i.test(header);
  const payload = uri.slice(comma + 1);
  // Checked on the encoded length first so a huge payload is refused before it is decoded.
  const estimate = base64 ? Math.floor((payload.length * 3) / 4) : payload.length;
  const tooLarge = () => new MediaFetchError('too_large', `${what} data URI is larger than the limit of ${maxBytes} bytes`, displayUrl(uri));
  if (estimate > maxBytes + 3) throw tooLarge();
  let data: Buffer;
  try {
    data = base64 ? Buffer.from(payload.replace(/\s+/g, ''), 'base64') : Buffer.from(decodeURIComponent(payload), 'utf8');
  } catch {
    throw new MediaFetchError('invalid_url', `${what} data URI is not correctly encoded`, displayUrl(uri));
  }
  if (data.length > maxBytes) throw tooLarge();
  if (data.length === 0) throw new MediaFetchError('invalid_url', `${what} data URI is empty`, displayUrl(uri));
  const declared = header.split(';')[0] || undefined;
  return { data, contentType: effectiveType(declared, data), url: `data:${header},` };
}

function checkType(media: FetchedMedia, opts: FetchMediaOptions, what: string): FetchedMedia {
  if (!opts.accept || opts.accept.length === 0) return media;
  const type = essence(media.contentType) ?? 'application/octet-stream';
  if (!matchesAccept(type, opts.accept))
    throw new MediaFetchError(
      'content_type',
      `${what} at ${displayUrl(media.url)} is ${type}, expected ${opts.accept.join(' or ')}`,
      media.url,
    );
  return media;
}

function networkReason(err: unknown): string {
  const e = err as { code?: string; message?: string };
  switch (e.code) {
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'the host name does not resolve';
    case 'ECONNREFUSED':
      return 'the connection was refused';
    case 'ECONNRESET':
      return 'the connection was reset';
    case 'ETIMEDOUT':
      return 'the connection timed out';
    default:
      return e.message ?? String(err);
  }
}
