import { randomBytes } from 'node:crypto';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';

export interface TestResponse<T = Record<string, unknown>> {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: T;
  text: string;
}

/** Drives a Nest Fastify app in-process through Fastify's inject (real routing, parsing, filters). */
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
