import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';

type Operation = { responses?: Record<string, { content?: Record<string, { schema?: unknown }> }> };
type Doc = { paths: Record<string, Record<string, Operation>> };

/** JSON Pointer escaping (RFC 6901) of one path segment. */
const pointer = (segment: string) => segment.replace(/~/g, '~0').replace(/\//g, '~1');

/**
 * Every answer an end-to-end test gets, checked against the gateway's own OpenAPI document (which is
 * generated from the one declaration of each shape in libs/contracts): a service whose answer drifts
 * from its documented schema fails the test that received it. Answers of a route or status the
 * document does not describe fail too. Checked: JSON answers of documented routes; error answers
 * against the one error envelope.
 */
export class DocumentedResponses {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
  private readonly routes: { method: string; pattern: RegExp; path: string; params: number }[] = [];
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(private readonly doc: Doc) {
    addFormats(this.ajv);
    this.ajv.addSchema(doc as object, 'openapi.json');
    for (const [path, methods] of Object.entries(doc.paths)) {
      const params = (path.match(/\{/g) ?? []).length;
      const source = path
        .split(/(\{\w+\})/)
        .map((part) => (part === '{path}' ? '.+' : /^\{\w+\}$/.test(part) ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
        .join('');
      for (const method of Object.keys(methods)) this.routes.push({ method, pattern: new RegExp(`^${source}$`), path, params });
    }
    // A literal segment wins over a parameter (`/api/ai/queue/webhook-secret` before `/api/ai/queue/{id}`).
    this.routes.sort((a, b) => a.params - b.params);
  }

  /** Why the answer does not match its documented schema, or undefined when it does (or is not checked). */
  problem(method: string, url: string, status: number, contentType: string | undefined, body: unknown): string | undefined {
    const path = url.split('?')[0];
    const route = this.routes.find((r) => r.method === method.toLowerCase() && r.pattern.test(path));
    if (!route) return undefined;
    if (!String(contentType ?? '').includes('application/json') || body === undefined) return undefined;
    const op = this.doc.paths[route.path][route.method];
    const answer = op.responses?.[String(status)];
    // A status described with other content (a stored file served with its own type) is not checked.
    if (answer?.content !== undefined && answer.content['application/json'] === undefined) return undefined;
    const documented = answer?.content?.['application/json']?.schema;
    let ref: string;
    if (documented !== undefined) ref = `openapi.json#/paths/${pointer(route.path)}/${route.method}/responses/${status}/content/${pointer('application/json')}/schema`;
    else if (status >= 400) ref = 'openapi.json#/components/schemas/Error';
    else if (answer !== undefined) return `${method} ${route.path} answered ${status} with a JSON body its description does not give`;
    else return `${method} ${route.path} answered ${status}, a status its description does not list`;
    let validate = this.compiled.get(ref);
    if (!validate) this.compiled.set(ref, (validate = this.ajv.compile({ $ref: ref })));
    if (validate(body)) return undefined;
    const errors = (validate.errors ?? []).slice(0, 5).map((e) => `${e.instancePath || '/'} ${e.message}${e.params && 'additionalProperty' in e.params ? ` (${String(e.params.additionalProperty)})` : ''}`);
    return `${method} ${route.path} ${status} does not match its documented schema: ${errors.join('; ')}`;
  }
}
