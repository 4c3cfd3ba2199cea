export { createTestEnvironment, queryOnce, testServers, type TestEnvironment } from './test-infrastructure';
export { nextMillisecond, waitFor } from './wait-for';
export { TestHttp, createTenant, uniqueName, type Tenant, type TestResponse } from './http-client';
export { bootHealthyAndClose, describeServiceBoot } from './service-boot';
export { fakeEmbedding, startFakeOpenAiUpstream, type FakeOpenAiUpstream, type FakeUpstreamOptions, type FakeUpstreamRequest } from './fake-openai-upstream';
export { metricValue } from './prometheus-text';
export { appProcessEnv, buildAppsForTest, repoRoot, rssOf, SERVICE_APPS, startAppProcess, type AppProcess } from './compiled-apps';
export { canRunThrowawayServers, freePort, startThrowawayPostgres, startThrowawayRedis, startThrowawayRedisCluster, type ThrowawayRedisCluster, type ThrowawayServer } from './throwaway-servers';
export {
  envelopeProblem,
  fc,
  internalTextProblem,
  hostileValue,
  multipartArbitrary,
  multipartPieces,
  requestArbitrary,
  valueFor,
  type FuzzContext,
  type FuzzRequest,
  type FuzzRoute,
  type JsonSchema,
  type MultipartShape,
} from './api-fuzzer';
export { chatUsageRows, type ChatUsageRow } from './chat-usage-rows';
export { QA_WORDS, qaDataset } from './qa-dataset';
export { streamedRequest, type StreamedAnswer } from './streamed-request';
export { sseEvents, sseJson } from './sse';
export { DocumentedResponses } from './documented-responses';
export { createUserNamespace } from './tenant-rows';
export { CLAUDE_CODE_VERSION, claudeCodeCli } from './claude-code-cli';
export { startFakeAnthropicUpstream, type FakeAnthropicRequest, type FakeAnthropicUpstream } from './fake-anthropic-upstream';
export { openAiError } from './openai-error';
