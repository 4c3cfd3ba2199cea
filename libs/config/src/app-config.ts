import { z } from 'zod';

const port = z.coerce.number().int().min(0).max(65535);
const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');
const positiveInt = z.coerce.number().int().positive();

/** Every setting atelier reads from the environment; nothing else reads process.env. */
const schema = z.object({
  NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
    .default('postgresql://postgres@127.0.0.1:5432/atelier'),
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL')
    .default('redis://127.0.0.1:6379'),
  /**
   * A Redis Cluster instead of REDIS_URL's single node: seed nodes as `host:port` or
   * `redis[s]://[user:password@]host:port`, comma-separated. The first URL's credentials and TLS
   * apply to every node (managed clusters share them); `host:port` seeds take REDIS_URL's.
   */
  REDIS_CLUSTER_NODES: z
    .string()
    .regex(/^\s*(?:(?:rediss?:\/\/[^,\s]+|[^,:\s/]+:\d+)\s*(?:,\s*|$))+$/, 'must be host:port or redis[s]:// URLs, comma-separated')
    .optional(),
  /** Prefix for every Redis key, queue and channel, so several installations (or test runs) can share one Redis. */
  REDIS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.-]+$/, 'letters, digits, "_", "." and "-" only')
    .default('atelier'),
  HOST: z.string().default('0.0.0.0'),
  PORT: port.default(8080),
  /** Ports of the internal services' health/metrics endpoints. */
  CHAT_PORT: port.default(8081),
  MEDIA_PORT: port.default(8082),
  QUEUE_WORKER_PORT: port.default(8083),
  EVENTS_PORT: port.default(8084),
  FINE_TUNE_PORT: port.default(8085),
  /** External base URL of the gateway; temporary result links are built on it. */
  PUBLIC_URL: z.url().optional(),
  STORAGE_DRIVER: z.enum(['local', 's3']).default('local'),
  /** Root of the local blob store (STORAGE_DRIVER=local); shared by every service on one host. */
  STORAGE_DIR: z.string().default('var/storage'),
  S3_ENDPOINT: z.url().optional(),
  S3_REGION: z.string().default('us-east-1'),
  S3_BUCKET: z.string().default('atelier'),
  S3_ACCESS_KEY_ID: z.string().optional(),
  S3_SECRET_ACCESS_KEY: z.string().optional(),
  S3_FORCE_PATH_STYLE: bool.default(true),
  /** HMAC key for temporary result links; every replica must share it. Required in production. */
  URL_SIGNING_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  RESULT_URL_TTL_SECONDS: positiveInt.default(3600),
  /** Which pools a queue-worker process runs: image and video generations, batch lines (any of them). */
  QUEUE_WORKER_POOLS: z
    .string()
    .default('image,video,batch')
    .transform((v) => v.split(',').map((p) => p.trim()).filter(Boolean))
    .pipe(z.array(z.enum(['image', 'video', 'batch'])).min(1, 'name at least one of image, video, batch')),
  /**
   * Batch lines one queue-worker runs at once (the batch pool): with R replicas running `batch`,
   * batches hold at most R times this many of the model servers' slots, whatever their backlog.
   */
  BATCH_WORKER_CONCURRENCY: positiveInt.max(256).default(8),
  /** The share taken off a batch line's price when its model's catalog entry sets no batch_discount (OpenAI's: 0.5, half price). */
  BATCH_DISCOUNT: z.coerce.number().min(0).max(1).default(0.5),
  /** How often a queue-worker expires batches past their window and re-queues lost batch work. */
  BATCH_SWEEP_INTERVAL_MS: positiveInt.default(5_000),
  /**
   * The most of a queue worker's generation slots (percent) one namespace may hold while other
   * namespaces' generations wait; 100 lets a burst take every idle slot until others arrive.
   */
  QUEUE_NAMESPACE_MAX_SHARE: positiveInt.max(100, 'must be a percentage between 1 and 100').default(100),
  /**
   * OpenTelemetry traces (docs/operations.md, "Traces"), the standard variables: off unless an OTLP
   * endpoint is set. OTEL_SERVICE_NAME defaults to the app's name.
   */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.string().url().optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.string().url().optional(),
  OTEL_EXPORTER_OTLP_PROTOCOL: z.enum(['http/protobuf', 'http/json']).default('http/protobuf'),
  OTEL_SERVICE_NAME: z.string().min(1).optional(),
  OTEL_TRACES_SAMPLER: z
    .enum(['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'])
    // Not parent-based by default: a caller's traceparent flag neither forces nor suppresses
    // sampling (traceidratio decides on the trace id, the same in every service).
    .default('always_on'),
  OTEL_TRACES_SAMPLER_ARG: z.coerce.number().min(0).max(1).optional(),
  OTEL_RESOURCE_ATTRIBUTES: z.string().optional(),
  /** Prompts and completions on the model spans (gen_ai.input.messages / gen_ai.output.messages); off by default. */
  OTEL_GENAI_CAPTURE_CONTENT: bool.default(false),
  /** Finished spans waiting for export at most; past it they are dropped and counted, never waited for. */
  OTEL_BSP_MAX_QUEUE_SIZE: positiveInt.max(1_000_000).default(2048),
  /** How long a stored Responses API answer (store: true) stays for previous_response_id and GET /api/ai/responses/{id}. */
  RESPONSES_TTL_DAYS: positiveInt.max(3650).default(30),
  /** How long a stored chat completion (store: true, or the namespace's capture_rate) is kept. */
  STORED_COMPLETIONS_TTL_DAYS: positiveInt.max(3650).default(30),
  /** Most stored completions one namespace keeps; past it the oldest go first (the hourly sweep). */
  STORED_COMPLETIONS_MAX_PER_NAMESPACE: positiveInt.max(100_000_000).default(100_000),
  /** Most bytes one uploaded file (POST /api/ai/files) may hold; OpenAI's batch input limit. */
  FILES_MAX_BYTES: positiveInt.default(200 * 1024 * 1024),
  /** Days an uploaded file is kept when its upload sets no expires_after. */
  FILES_TTL_DAYS: positiveInt.max(3650).default(30),
  /** How often each gateway deletes expired files (their records, then their bytes), at most 500 a time. */
  FILES_SWEEP_INTERVAL_MS: positiveInt.default(600_000),
  /** Most bytes one stored conversation (a chain of previous_response_id) may hold; a turn past it is a 400. */
  RESPONSES_MAX_CHAIN_BYTES: positiveInt.default(64 * 1024 * 1024),
  /** How often a trainer must call in (events) on a lease; 3 times this without one and the lease is lost. */
  TRAINER_HEARTBEAT_SECONDS: positiveInt.default(30),
  /** Leases a fine-tune run may lose before it is errored. */
  TRAINER_MAX_ATTEMPTS: positiveInt.default(3),
  /** The largest file a trainer may upload into a checkpoint. */
  MAX_CHECKPOINT_BYTES: positiveInt.default(2 * 1024 ** 3),
  /** The fine-tune service runs the built-in trainer (atelier/local-chat) as a client of the trainer API. */
  BUILTIN_TRAINER: bool.default(true),
  /** Where the built-in trainer reaches the trainer API (the gateway); default http://127.0.0.1:<PORT>. */
  BUILTIN_TRAINER_API_URL: z.string().url().optional(),
  /** The built-in trainer's pause between steps (a demonstration engine learns in milliseconds; this paces it like a real run). */
  BUILTIN_TRAINER_STEP_MS: z.coerce.number().int().min(0).default(200),
  /** Runs the built-in trainer of one fine-tune service process trains at once: one stalled run never holds the others. */
  BUILTIN_TRAINER_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(2),
  /** A built-in run that has not finished by then fails, naming this setting. */
  BUILTIN_TRAINER_RUN_TIMEOUT_MS: positiveInt.default(6 * 60 * 60_000),
  /** Bound on each download of the built-in trainer (the dataset, a checkpoint), connect to last byte. */
  BUILTIN_TRAINER_FETCH_TIMEOUT_MS: positiveInt.default(120_000),
  /**
   * Where deployed LoRA adapters are written, one directory per model; the LoRA servers (the
   * catalog models with lora_base_model) must see it at the same path (a shared volume).
   */
  LORA_ADAPTER_DIR: z.string().default('var/lora-adapters'),
  /** How often the chat service checks that the LoRA servers still hold their deployed adapters. */
  LORA_RECONCILE_INTERVAL_MS: positiveInt.default(60_000),
  /** How often lost trainer leases are looked for. */
  TRAINER_SWEEP_INTERVAL_MS: positiveInt.default(5_000),
  /** How often a queue worker re-adds lost jobs and re-publishes stranded events. */
  GENERATION_SWEEP_INTERVAL_MS: positiveInt.default(5_000),
  /** A generation processing this long whose BullMQ job is gone or failed is failed as lost. */
  GENERATION_LOST_AFTER_MS: positiveInt.default(15 * 60_000),
  /** Overrides every queue's lock duration and stalled-job check (tests use short ones to recover killed workers fast). */
  JOB_LOCK_DURATION_MS: positiveInt.optional(),
  /** Idle SSE streams get a `: keep-alive` comment this often (the spec says 15 s). */
  EVENTS_KEEPALIVE_MS: positiveInt.default(15_000),
  /** How long a user's events are kept for event streams that resume with Last-Event-ID (at most 1,000 per user). */
  EVENTS_REPLAY_SECONDS: positiveInt.default(600),
  /** Unsent bytes a slow SSE client may accumulate before it is disconnected. */
  EVENTS_MAX_BUFFER_BYTES: positiveInt.default(256 * 1024),
  /** Event streams one API key may hold open at once on one gateway replica; one more gets 429. */
  EVENTS_MAX_STREAMS_PER_KEY: positiveInt.default(16),
  /**
   * Hosts (or host:port) that input-media fetches may reach even though they resolve to loopback,
   * private, link-local or metadata addresses (an in-cluster asset server, test fixtures).
   * Comma-separated; empty by default, so such addresses are refused (SSRF guard).
   */
  /**
   * Waits before each retry of a webhook delivery (each with up to 25 % jitter): after the
   * first attempt fails, then after the second, ...; past the last one it is given up. The
   * default spans about 24 h: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 6 h.
   */
  WEBHOOK_RETRY_DELAYS_MS: z
    .string()
    .default('5000,300000,1800000,7200000,18000000,36000000,21600000')
    .transform((v) => v.split(',').map((p) => p.trim()).filter(Boolean).map(Number))
    .pipe(z.array(z.number().int().positive()).max(20)),
  MEDIA_FETCH_ALLOWED_HOSTS: z
    .string()
    .default('')
    .transform((v) =>
      v
        .split(',')
        .map((h) => h.trim().toLowerCase())
        .filter(Boolean),
    ),
  /** Whole-download bound for one input image/video (connect + headers + body). */
  MEDIA_FETCH_TIMEOUT_MS: positiveInt.default(30_000),
  /** Largest input image/video the media engines download or decode from a data URI. */
  MEDIA_FETCH_MAX_BYTES: positiveInt.default(50 * 1024 * 1024),
  /** Extra delay per built-in (local-*) generation, to emulate slow real providers in development and tests. */
  LOCAL_ENGINE_LATENCY_MS: z.coerce.number().int().min(0).default(0),
  /** ffmpeg binary of the local-video engine; defaults to the one shipped by @ffmpeg-installer/ffmpeg. */
  FFMPEG_PATH: z.string().optional(),
  BODY_LIMIT_BYTES: positiveInt.default(32 * 1024 * 1024),
  /** How long a client may take to send a request's headers (from its first byte); then 408 and the connection closes. */
  HTTP_HEADERS_TIMEOUT_MS: positiveInt.default(30_000),
  /** How long a client may take to send a whole request, headers and body; then 408. Never counts the wait for the answer. */
  HTTP_REQUEST_TIMEOUT_MS: positiveInt.default(300_000),
  /** A request body that sends nothing for this long is cut off with 408 (nginx's client_body_timeout); a slow body that keeps sending is not. */
  HTTP_BODY_IDLE_TIMEOUT_MS: positiveInt.default(60_000),
  /** How long an idle keep-alive connection is kept between requests. */
  HTTP_KEEP_ALIVE_TIMEOUT_MS: positiveInt.default(72_000),
  /** Connections at once (per process) that have not yet delivered a whole request; new ones past it are closed. */
  HTTP_MAX_INCOMPLETE_REQUESTS: positiveInt.default(1024),
  /** Most image parts one multipart edit (`POST /api/ai/images/edits`) may carry; the next is refused unread. */
  EDIT_MAX_IMAGES: positiveInt.default(16),
  /** Bytes all image parts of one multipart edit may total (each also at most MEDIA_FETCH_MAX_BYTES); counted as they stream in. */
  EDIT_MAX_TOTAL_BYTES: positiveInt.default(32 * 1024 * 1024),
  ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /**
   * Which X-Forwarded-* headers to believe (the client address for throttles and logs, https for
   * cookies): `off` (the default: none; the peer is the client), a hop count (`1`: the one proxy in
   * front, such as an ingress), or comma-separated addresses/CIDRs of trusted proxies.
   */
  TRUST_PROXY: z
    .string()
    .default('off')
    .transform((v, ctx): boolean | number | string[] => {
      const value = v.trim().toLowerCase();
      if (value === 'off' || value === 'false' || value === '0' || value === '') return false;
      if (/^\d+$/.test(value)) return Number(value);
      const list = value.split(',').map((p) => p.trim()).filter(Boolean);
      const address = /^(\d{1,3}(\.\d{1,3}){3}|[0-9a-f:]+)(\/\d{1,3})?$/;
      const bad = list.filter((p) => !address.test(p) && !['loopback', 'linklocal', 'uniquelocal'].includes(p));
      if (bad.length) ctx.addIssue({ code: 'custom', message: `must be off, a hop count, or addresses/CIDRs of trusted proxies (not ${bad.join(', ')}); "true" (trust anyone) is not accepted` });
      return list;
    }),
  /** Postgres connections each process holds at most. */
  DATABASE_POOL_SIZE: positiveInt.max(500).default(10),
  /** How long a transaction waits for a free connection before its request is answered 503 (overload). */
  DATABASE_TX_MAX_WAIT_MS: positiveInt.default(10_000),
  /** Failed authentications (a wrong key, token or admin token) one client address may make per minute before 429 (docs/operations.md, "Security"). */
  AUTH_FAILURES_PER_MINUTE: positiveInt.default(30),
  /** How long a verified API key is trusted without re-reading Postgres; bounds revocation delay. */
  AUTH_CACHE_MS: z.coerce.number().int().min(0).max(1000).default(1000),
  /** A console session ends this long after its last request (docs/console.md). */
  CONSOLE_SESSION_IDLE_MINUTES: z.coerce.number().int().min(1).max(7 * 24 * 60).default(120),
  /** ... and at the latest this long after sign-in, however active. */
  CONSOLE_SESSION_MAX_HOURS: z.coerce.number().int().min(1).max(30 * 24).default(12),
  /** The built console (index.html and assets/); unset, found beside the gateway's build (dist/console). */
  CONSOLE_DIR: z.string().optional(),
  /** How long the answer to a POST sent with an Idempotency-Key is kept for retries with the same key. */
  IDEMPOTENCY_TTL_SECONDS: positiveInt.default(86_400),
  /** Time a synchronous gateway call waits for its service before answering 504. */
  RPC_TIMEOUT_MS: positiveInt.default(15 * 60 * 1000),
  /**
   * Streams each request/response queue (chat, media) is spread over, each with its own hash tag:
   * in a Redis Cluster, so one busy service's hand-off is not one shard's work. Default 1 on one
   * node, and the number of REDIS_CLUSTER_NODES seeds in a cluster (list the primaries).
   */
  RPC_STREAM_SHARDS: z.coerce.number().int().min(1).max(64).optional(),
  /**
   * How long past RPC_TIMEOUT_MS a synchronous request's credit reservation may stay open before
   * the stale-reservation sweep releases it (its gateway died before settling). A settle that
   * meets a database outage keeps retrying for 80 % of this, so the sweep never races it.
   */
  RESERVATION_GRACE_MS: positiveInt.default(5 * 60_000),
  /** How often each service sweeps the stale reservations of its kind of paid request. */
  RESERVATION_SWEEP_INTERVAL_MS: positiveInt.default(60_000),
  SHUTDOWN_TIMEOUT_MS: positiveInt.default(25_000),
  /**
   * How far V8 lets the old generation grow past what the last full collection kept before the
   * next one (percent; 0 leaves V8's own choice). V8's own headroom in these services was a few MB
   * after start-up, so the first traffic burst met a Mark-Compact (10-25 ms) in its first second.
   */
  V8_HEAP_GROWING_PERCENT: z.coerce.number().int().min(0).max(400).default(100),
  MODEL_CATALOG_DIR: z.string().optional(),
  DEMO_USER: z.string().default('demo'),
  DEMO_CREDITS: z.string().regex(/^\d+(\.\d+)?$/).default('100'),
  /** Largest single file accepted by a repository upload (multipart); larger files get 413. */
  REPO_UPLOAD_MAX_FILE_BYTES: positiveInt.default(2 * 1024 * 1024 * 1024),
  /** Most files one repository upload may carry. */
  REPO_UPLOAD_MAX_FILES: positiveInt.default(100),
  /** Largest Parquet footer (metadata) a fine-tune dataset may have: it is decoded whole, into objects. */
  DATASET_MAX_FOOTER_BYTES: positiveInt.default(4 * 1024 * 1024),
  /** Most rows a fine-tune dataset may have. */
  DATASET_MAX_ROWS: positiveInt.default(10_000_000),
  /** Most rows decoded at once (a row group without a page index is decoded whole). */
  DATASET_MAX_WINDOW_ROWS: positiveInt.default(1_048_576),
  /** Most uncompressed bytes (as the file declares them) of the columns read, decoded at once. */
  DATASET_MAX_WINDOW_BYTES: positiveInt.default(512 * 1024 * 1024),
  /** How many invalid dataset rows a tokenization reports with row number and reason. */
  TOKENIZE_INVALID_EXAMPLES: positiveInt.default(100),
  PRETTY_LOGS: bool.optional(),
  /** When set, GET /metrics needs `Authorization: Bearer <METRICS_TOKEN>` (e.g. when the gateway's /metrics is reachable from outside). */
  METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  /**
   * Serve GET /metrics on this port only (not the app's own port), for Prometheus inside the
   * cluster; the manifests set it and expose it through no Service. Production needs it or METRICS_TOKEN.
   */
  METRICS_PORT: z.coerce.number().int().min(1).max(65535).optional(),
});

/** Secrets a production deployment must not run with: shorter than this, or a published value. */
const PRODUCTION_SECRET_MIN_LENGTH = 32;
const PUBLISHED_SECRET = /change[-_ ]?me|insecure|example|placeholder|your[-_ ]?(admin|secret|token)|^(.)\2+$/i;

/** Why a production secret is refused, or undefined when it is acceptable. */
export function weakSecretReason(value: string): string | undefined {
  if (value === DEV_URL_SIGNING_SECRET || PUBLISHED_SECRET.test(value)) return 'is a published default or placeholder; generate one (openssl rand -hex 32)';
  if (value.length < PRODUCTION_SECRET_MIN_LENGTH) return `must be at least ${PRODUCTION_SECRET_MIN_LENGTH} characters in production (openssl rand -hex 32)`;
  if (new Set(value).size < 10) return 'has too few distinct characters to be a random secret (openssl rand -hex 32)';
  return undefined;
}

const checked = schema.superRefine((c, ctx) => {
  if (c.NODE_ENV === 'production') {
    if (!c.URL_SIGNING_SECRET) ctx.addIssue({ code: 'custom', path: ['URL_SIGNING_SECRET'], message: 'is required in production' });
    // Metrics name namespaces: in production they are never public on the app's own port.
    if (c.METRICS_TOKEN === undefined && c.METRICS_PORT === undefined)
      ctx.addIssue({ code: 'custom', path: ['METRICS_PORT'], message: 'production needs METRICS_PORT (metrics on a port of their own) or METRICS_TOKEN (metrics behind a bearer token)' });
    for (const name of ['URL_SIGNING_SECRET', 'ADMIN_TOKEN', 'METRICS_TOKEN'] as const) {
      const value = c[name];
      const reason = value ? weakSecretReason(value) : undefined;
      if (reason) ctx.addIssue({ code: 'custom', path: [name], message: reason });
    }
  }
  if (c.HTTP_HEADERS_TIMEOUT_MS > c.HTTP_REQUEST_TIMEOUT_MS)
    ctx.addIssue({ code: 'custom', path: ['HTTP_HEADERS_TIMEOUT_MS'], message: 'must not exceed HTTP_REQUEST_TIMEOUT_MS (the headers are part of the request)' });
  if (c.STORAGE_DRIVER === 's3' && !c.S3_ENDPOINT && !c.S3_REGION)
    ctx.addIssue({ code: 'custom', path: ['S3_ENDPOINT'], message: 'S3 storage needs S3_ENDPOINT or S3_REGION' });
});

export type AppConfig = z.infer<typeof schema>;

/** Outside production a fixed, clearly insecure key keeps links valid across local processes. */
export const DEV_URL_SIGNING_SECRET = 'atelier-dev-insecure-url-signing-secret';

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Parses and validates the environment once; throws ConfigError listing every bad variable. */
export function parseConfig(env: Record<string, string | undefined>): AppConfig {
  // Empty strings mean "unset" so `FOO=` in an env file falls back to the default.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const result = checked.safeParse(cleaned);
  if (!result.success) {
    throw new ConfigError(
      result.error.issues.map((i) => `${i.path.join('.') || '(env)'}: ${i.message}`),
    );
  }
  return result.data;
}

/**
 * Each upstream call looks its key up, and a read of process.env is a call into C++ (0.27 us
 * in a tight loop; 4.7 us a request, about 1 % of the chat service, in its CPU profile under
 * bench:chat). Nothing outside the process can change its environment, so a value once found is
 * kept; one not found yet is read again on each use. Names come from the model catalog, so the
 * map stays small.
 */
const foundSecrets = new Map<string, string>();

/**
 * Secrets of remote engines are named in the model catalog by environment variable
 * (`api_key_env`), so their names are not known when the schema above is written. Read here,
 * on use, to keep process.env access in this lib.
 */
export function secretFromEnv(name: string): string | undefined {
  const known = foundSecrets.get(name);
  if (known !== undefined) return known;
  if (!/^[A-Z_][A-Z0-9_]*$/.test(name)) return undefined;
  const value = process.env[name];
  if (value === undefined || value === '') return undefined;
  foundSecrets.set(name, value);
  return value;
}

/** Reads process.env exactly once per process (the single place allowed to). */
let cached: AppConfig | undefined;
export function loadConfig(): AppConfig {
  cached ??= parseConfig(process.env);
  return cached;
}

/** Loads config or ends the process with a readable message instead of a stack trace. */
export function loadConfigOrExit(): AppConfig {
  try {
    return loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(78); // EX_CONFIG
    }
    throw err;
  }
}
