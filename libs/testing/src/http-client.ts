import { randomBytes } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { DocumentedResponses } from './documented-responses';

export interface TestResponse<T = Record<string, unknown>> {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: T;
  text: string;
}

/** The document each app serves, read once per app; null for an app without one (not the gateway). */
const documents = new WeakMap<object, Promise<DocumentedResponses | null>>();

function documentOf(app: NestFastifyApplication): Promise<DocumentedResponses | null> {
  const fastify = app.getHttpAdapter().getInstance();
  let doc = documents.get(fastify);
  if (!doc) {
    doc = fastify.inject({ method: 'GET', url: '/api/openapi.json' }).then(
      (res) => (res.statusCode === 200 ? new DocumentedResponses(JSON.parse(res.body)) : null),
      () => null,
    );
    documents.set(fastify, doc);
  }
  return doc;
}

/**
 * Drives a Nest Fastify app in-process through Fastify's inject (real routing, parsing, filters).
 * Every JSON answer of the gateway is checked against the schema its OpenAPI document gives for it
 * (DocumentedResponses): an answer that drifted fails the test that got it.
 * `ATELIER_RESPONSE_DRIFT_LOG=<file>` lists the drifts in that file instead of failing.
 */
export class TestHttp {
  constructor(private readonly app: NestFastifyApplication) {}

  async request<T = Record<string, unknown>>(
    method: 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH',
    url: string,
    opts: { token?: string; body?: unknown; rawBody?: string | Buffer; headers?: Record<string, string> } = {},
  ): Promise<TestResponse<T>> {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
    let payload: string | Buffer | undefined;
    if (opts.rawBody !== undefined) payload = opts.rawBody;
    else if (opts.body !== undefined) {
      payload = JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await this.app.getHttpAdapter().getInstance().inject({ method, url, headers, payload });
    let body: unknown = undefined;
    try {
      body = res.body ? JSON.parse(res.body) : undefined;
    } catch {
      body = undefined;
    }
    const drift = (await documentOf(this.app))?.problem(method, url, res.statusCode, res.headers['content-type'] as string | undefined, body);
    if (drift !== undefined) {
      const log = process.env.ATELIER_RESPONSE_DRIFT_LOG;
      if (log) appendFileSync(log, `${JSON.stringify({ drift, body: res.body.slice(0, 600) })}\n`);
      else throw new Error(`Undocumented answer: ${drift}\n${res.body.slice(0, 1000)}`);
    }
    return { status: res.statusCode, headers: res.headers, body: body as T, text: res.body };
  }
}

/** A random, valid tenant name so every suite works with its own users and namespaces. */
export function uniqueName(prefix = 'u'): string {
  return `${prefix}-${randomBytes(5).toString('hex')}`;
}

export interface Tenant {
  username: string;
  namespace: string;
  apiKey: string;
}

/** Creates a user (namespace + key) through the real admin API. */
export async function createTenant(http: TestHttp, adminToken: string, credits = '100'): Promise<Tenant> {
  const username = uniqueName();
  const res = await http.request<{ username: string; namespace: string; api_key: string }>('POST', '/api/admin/users', {
    token: adminToken,
    body: { username, credits },
  });
  if (res.status !== 201) throw new Error(`creating tenant failed: ${res.status} ${res.text}`);
  return { username, namespace: res.body.namespace, apiKey: res.body.api_key };
}
