import type { AnthropicEngineConfig, OpenAiCompatibleEngineConfig } from '@atelier/models';

/**
 * Where an OpenAI-compatible engine's calls go: its server and its fallbacks, each parsed once per
 * catalog entry, with the timeout and keep-alive that apply to it.
 */
export const DEFAULT_UPSTREAM_TIMEOUT_MS = 60_000;
/** undici's own default, named: the engine's keep_alive_ms explains the choice. */
export const DEFAULT_UPSTREAM_KEEP_ALIVE_MS = 4_000;

export interface Endpoint {
  baseUrl: string;
  /** Where `${baseUrl}/chat/completions` (an anthropic engine's: `/messages`) is, worked out once. */
  target: { origin: string; path: string; basicAuth?: string };
  upstreamModel: string;
  apiKeyEnv?: string;
  timeoutMs: number;
  /** How long an idle connection waits for the next call when the server gives no Keep-Alive hint. */
  keepAliveMs: number;
  label: string;
}

/** The origin and path of a URL (the catalog only admits http(s) base URLs), and the Basic credentials it carries. */
function requestTarget(url: URL): Endpoint['target'] {
  const credentials = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
  return {
    origin: url.origin,
    path: `${url.pathname}${url.search}`,
    ...(url.username || url.password ? { basicAuth: `Basic ${Buffer.from(credentials).toString('base64')}` } : {}),
  };
}

/** A route of an endpoint's server (`/embeddings`), worked out once per endpoint. */
const routeTargets = new WeakMap<Endpoint, Map<string, Endpoint['target']>>();

export function routeTarget(endpoint: Endpoint, route: string): Endpoint['target'] {
  let targets = routeTargets.get(endpoint);
  if (!targets) routeTargets.set(endpoint, (targets = new Map()));
  let target = targets.get(route);
  if (!target) targets.set(route, (target = requestTarget(new URL(`${endpoint.baseUrl}${route}`))));
  return target;
}

/** Per engine definition (catalog entries are immutable once loaded), so a call parses no URLs. */
const endpointCache = new WeakMap<OpenAiCompatibleEngineConfig | AnthropicEngineConfig, Endpoint[]>();

export function endpointsOf(engine: OpenAiCompatibleEngineConfig | AnthropicEngineConfig): Endpoint[] {
  const cached = endpointCache.get(engine);
  if (cached) return cached;
  const all = [engine, ...(engine.fallbacks ?? [])];
  const endpoints = all.map((e) => {
    const baseUrl = e.base_url.replace(/\/+$/, '');
    return {
      baseUrl,
      target: requestTarget(new URL(`${baseUrl}${engine.type === 'anthropic' ? '/messages' : '/chat/completions'}`)),
      upstreamModel: e.upstream_model,
      apiKeyEnv: e.api_key_env,
      timeoutMs: e.timeout_ms ?? engine.timeout_ms ?? DEFAULT_UPSTREAM_TIMEOUT_MS,
      keepAliveMs: e.keep_alive_ms ?? engine.keep_alive_ms ?? DEFAULT_UPSTREAM_KEEP_ALIVE_MS,
      label: `${engine.type}:${e.upstream_model}@${new URL(baseUrl).host}`,
    };
  });
  endpointCache.set(engine, endpoints);
  return endpoints;
}
