import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import OpenAI from 'openai';
import { ChatServiceModule } from '@atelier/chat';
import { defaultCatalogDir } from '@atelier/models';
import { createService } from '@atelier/runtime';
import { startFakeAnthropicUpstream, startFakeOpenAiUpstream, type FakeAnthropicUpstream, type FakeOpenAiUpstream } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';

export const FAKE_UPSTREAM_KEY_ENV = 'ATELIER_TEST_UPSTREAM_API_KEY';
export const FAKE_UPSTREAM_KEY = 'sk-fake-upstream-0123456789';
export const FAKE_ANTHROPIC_KEY_ENV = 'ATELIER_TEST_ANTHROPIC_API_KEY';
export const FAKE_ANTHROPIC_KEY = 'sk-ant-fake-0123456789';

/** Models on the fake Anthropic upstream (an `anthropic` engine): id -> its upstream model and settings. */
const NATIVE_MODELS: Record<string, Record<string, unknown>> = {
  'claude-native': { upstream_model: 'claude-echo' },
  'claude-native-tool': { upstream_model: 'claude-tool' },
  'claude-native-writer': { upstream_model: 'claude-writer', context_window: 200_000 },
  'claude-native-overloaded': { upstream_model: 'claude-overloaded', max_retries: 0 },
};

/** Remote chat models served by the fake upstream: id -> engine settings. */
const REMOTE_MODELS: Record<string, Record<string, unknown>> = {
  'remote-echo': { upstream_model: 'echo' },
  'remote-no-usage': { upstream_model: 'echo-no-usage' },
  'remote-tool': { upstream_model: 'tool' },
  'remote-flaky': { upstream_model: 'flaky-2', max_retries: 2 },
  'remote-rate-limited': { upstream_model: 'rate-limited-1', max_retries: 1 },
  'remote-fallback': { upstream_model: 'down', max_retries: 1, fallbacks: 'echo' },
  'remote-all-down': { upstream_model: 'down', max_retries: 1 },
  'remote-down-nul': { upstream_model: 'down-nul', max_retries: 0 },
  'remote-bad-key': { upstream_model: 'echo', api_key_env: 'ATELIER_TEST_UNSET_API_KEY', max_retries: 0, fallbacks: 'echo' },
  'remote-reject': { upstream_model: 'reject' },
  'remote-hang': { upstream_model: 'hang', timeout_ms: 300, max_retries: 0 },
  'remote-cut': { upstream_model: 'cut' },
  'remote-error-stream': { upstream_model: 'error-mid-stream' },
  'remote-slow': { upstream_model: 'slow' },
  // Unstreamed answers that take 300 ms (batch lines still running when a batch is cancelled).
  'remote-delay': { upstream_model: 'delay-300' },
  // ... and 20 ms (a 2,000-line batch that runs for seconds).
  'remote-quick': { upstream_model: 'delay-20' },
  // Room for an agent's whole prompt (the Codex CLI sends some 10,000 tokens of instructions and tools).
  'remote-echo-wide': { upstream_model: 'echo', context_window: 200_000 },
  // Servers that speak the Responses API themselves.
  'remote-responder': { upstream_model: 'responder', responses_api: true },
  // ... and one whose operator lets callers use its hosted web search.
  'remote-responder-search': { upstream_model: 'responder', responses_api: true, responses_tools: ['web_search'] },
  'remote-responder-fail': { upstream_model: 'responder-fail', responses_api: true, max_retries: 0 },
  // An agent's scripted turns (a Write tool call, then text), under the names Claude Code uses by default.
  'remote-writer': { upstream_model: 'writer', context_window: 200_000, aliases: ['claude-sonnet-4-6', 'claude-haiku-4-5'] },
  // Every attempt rate limited by the upstream: Anthropic's clients see 529 overloaded_error.
  'remote-saturated': { upstream_model: 'rate-limited-99', max_retries: 0 },
};

/** An openai-compatible engine on the fake upstream (quick retries), with its settings and a fallback upstream model. */
function fakeUpstreamEngine(upstreamUrl: string, settings: Record<string, unknown>, fallbacks: unknown): Record<string, unknown> {
  return {
    type: 'openai-compatible',
    base_url: upstreamUrl,
    api_key_env: FAKE_UPSTREAM_KEY_ENV,
    retry_backoff_ms: 5,
    timeout_ms: 5000,
    ...settings,
    ...(fallbacks ? { fallbacks: [{ base_url: upstreamUrl, upstream_model: fallbacks, api_key_env: FAKE_UPSTREAM_KEY_ENV }] } : {}),
  };
}

export function remoteDefinition(id: string, upstreamUrl: string, settings: Record<string, unknown>): Record<string, unknown> {
  const { fallbacks, context_window: contextWindow, aliases, ...engine } = settings;
  return {
    id,
    ...(aliases ? { aliases } : {}),
    created: 1767225600,
    owned_by: 'test',
    display_name: id,
    description: `Test model served by the fake upstream (${String(settings.upstream_model)})`,
    endpoint: '/chat/completions',
    capabilities: { input: ['text'], output: ['text'] },
    pricing: { method: 'token', input_cost_per_token: '0.00001', output_cost_per_token: '0.00003' },
    context_window: contextWindow ?? 8192,
    default_max_tokens: 256,
    features: { tools: true, json_mode: true, streaming: true },
    engine: fakeUpstreamEngine(upstreamUrl, engine, fallbacks),
    parameters: { type: 'object', properties: {} },
  };
}

/** Embedding models served by the fake upstream: id -> engine settings and the model's max_batch. */
const REMOTE_EMBEDDING_MODELS: Record<string, { upstream_model: string; max_batch?: number; fallbacks?: string; max_retries?: number }> = {
  'remote-embed': { upstream_model: 'embed', max_batch: 100 },
  'remote-embed-no-usage': { upstream_model: 'embed-no-usage' },
  'remote-embed-fallback': { upstream_model: 'embed-down', max_retries: 1, fallbacks: 'embed' },
};

function remoteEmbeddingDefinition(id: string, upstreamUrl: string, settings: (typeof REMOTE_EMBEDDING_MODELS)[string]): Record<string, unknown> {
  const { max_batch, fallbacks, ...engine } = settings;
  return {
    id,
    created: 1767225600,
    owned_by: 'test',
    display_name: id,
    description: `Test embedding model served by the fake upstream (${settings.upstream_model})`,
    endpoint: '/embeddings',
    capabilities: { input: ['text'], output: ['embedding'] },
    pricing: { method: 'token', input_cost_per_token: '0.00001' },
    context_window: 8192,
    dimensions: 8,
    ...(max_batch && { max_batch }),
    engine: fakeUpstreamEngine(upstreamUrl, engine, fallbacks),
    parameters: { type: 'object', properties: {} },
  };
}

export interface ChatStack {
  gw: GatewayHarness;
  chat: NestFastifyApplication;
  upstream: FakeOpenAiUpstream;
  anthropicUpstream: FakeAnthropicUpstream;
  /** http://127.0.0.1:<port> of the listening gateway. */
  base: string;
  client(apiKey: string): OpenAI;
  close(): Promise<void>;
}

/**
 * A listening gateway, a chat service consuming the queue in-process (the module apps/chat
 * boots), and a fake OpenAI-compatible upstream, all on a fresh database and Redis prefix. The
 * catalog is the built-in one plus remote models pointing at the fake upstream.
 */
export async function startChatStack(overrides: Record<string, string> = {}): Promise<ChatStack> {
  // The key reaches the chat service by name through the environment, as in a deployment.
  const upstream = await startFakeOpenAiUpstream({ apiKey: FAKE_UPSTREAM_KEY, apiKeyEnv: FAKE_UPSTREAM_KEY_ENV });
  const catalogDir = fs.mkdtempSync(path.join(os.tmpdir(), 'atelier-chat-catalog-'));
  for (const file of fs.readdirSync(defaultCatalogDir())) fs.copyFileSync(path.join(defaultCatalogDir(), file), path.join(catalogDir, file));
  for (const [id, settings] of Object.entries(REMOTE_MODELS))
    fs.writeFileSync(path.join(catalogDir, `${id}.json`), JSON.stringify(remoteDefinition(id, upstream.url, settings)));
  const anthropicUpstream = await startFakeAnthropicUpstream({ apiKey: FAKE_ANTHROPIC_KEY });
  process.env[FAKE_ANTHROPIC_KEY_ENV] = FAKE_ANTHROPIC_KEY;
  for (const [id, settings] of Object.entries(NATIVE_MODELS)) {
    const { context_window: contextWindow, ...engine } = settings;
    const definition = remoteDefinition(id, upstream.url, { upstream_model: 'unused', ...(contextWindow ? { context_window: contextWindow } : {}) });
    definition.engine = { type: 'anthropic', base_url: anthropicUpstream.url, api_key_env: FAKE_ANTHROPIC_KEY_ENV, retry_backoff_ms: 5, timeout_ms: 5000, ...engine };
    fs.writeFileSync(path.join(catalogDir, `${id}.json`), JSON.stringify(definition));
  }
  for (const [id, settings] of Object.entries(REMOTE_EMBEDDING_MODELS))
    fs.writeFileSync(path.join(catalogDir, `${id}.json`), JSON.stringify(remoteEmbeddingDefinition(id, upstream.url, settings)));

  const gw = await startGateway({ MODEL_CATALOG_DIR: catalogDir, MEDIA_FETCH_ALLOWED_HOSTS: '127.0.0.1', ...overrides });
  const chat = await createService(ChatServiceModule.forRoot(gw.env.config), gw.env.config, { service: 'chat' });
  await gw.app.listen({ port: 0, host: '127.0.0.1' });
  const address = gw.app.getHttpServer().address() as { port: number };
  const base = `http://127.0.0.1:${address.port}`;
  return {
    gw,
    chat,
    upstream,
    anthropicUpstream,
    base,
    client: (apiKey) => new OpenAI({ apiKey, baseURL: `${base}/api/ai`, maxRetries: 0, timeout: 20_000 }),
    close: async () => {
      await chat.close();
      await gw.close();
      await upstream.close();
      await anthropicUpstream.close();
      fs.rmSync(catalogDir, { recursive: true, force: true });
    },
  };
}
