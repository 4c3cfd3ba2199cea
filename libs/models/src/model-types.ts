/** A JSON value as it appears in a catalog file or a request body. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

export type JsonType = 'string' | 'number' | 'integer' | 'boolean' | 'array' | 'object' | 'null';

/** How a UI should render a parameter in a generated form. */
export type RenderType =
  | 'text'
  | 'textarea'
  | 'select'
  | 'slider'
  | 'number'
  | 'switch'
  | 'image'
  | 'video'
  | 'audio'
  | 'list'
  | 'json';

/**
 * The subset of JSON Schema (draft 2020-12) the catalog uses, plus the UI hint keywords.
 * The index signature keeps the type open because catalog authors may use any standard keyword.
 */
export interface JsonSchemaObject {
  $schema?: string;
  $defs?: Record<string, JsonSchema>;
  $ref?: string;
  type?: JsonType | JsonType[];
  title?: string;
  description?: string;
  default?: JsonValue;
  examples?: JsonValue[];
  enum?: JsonValue[];
  const?: JsonValue;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: JsonSchema;
  items?: JsonSchema;
  minItems?: number;
  maxItems?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  multipleOf?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  not?: JsonSchema;
  discriminator?: { propertyName: string };
  /** UI hint: position of the field in a generated form (ascending). */
  'x-order'?: number;
  /** UI hint: shown in the basic form; otherwise only in the advanced form. */
  basic?: boolean;
  /** UI hint: which widget renders the field. */
  renderType?: RenderType;
  /** Replaces the generated validation message for errors raised by this schema node. */
  'x-error-message'?: string;
  [keyword: string]: unknown;
}

export type JsonSchema = JsonSchemaObject | boolean;

export type ModelEndpoint = '/chat/completions' | '/images/generate' | '/images/edit' | '/videos/generate' | '/embeddings';

export const MODEL_ENDPOINTS: readonly ModelEndpoint[] = [
  '/chat/completions',
  '/images/generate',
  '/images/edit',
  '/videos/generate',
  '/embeddings',
];

export type Modality = 'text' | 'image' | 'video' | 'audio' | 'embedding';

export const MODALITIES: readonly Modality[] = ['text', 'image', 'video', 'audio', 'embedding'];

export interface ModelCapabilities {
  input: Modality[];
  output: Modality[];
}

/** Money is kept as decimal strings end to end so no price ever passes through a float. */
export type DecimalString = string;

export interface TokenPricing {
  method: 'token';
  input_cost_per_token: DecimalString;
  output_cost_per_token: DecimalString;
}

export interface PerImagePricing {
  method: 'per_image';
  cost_per_image: DecimalString;
}

export interface PerVideoSecondPricing {
  method: 'per_video_output_second';
  cost_per_second: DecimalString;
}

/** Embeddings are billed per input token only (the method is `token`; an output price, if given, is never charged). */
export interface InputTokenPricing {
  method: 'token';
  input_cost_per_token: DecimalString;
  output_cost_per_token?: DecimalString;
}

export type Pricing = TokenPricing | PerImagePricing | PerVideoSecondPricing | InputTokenPricing;
export type PricingMethod = Pricing['method'];

/** Runs the model in-process (the stub engines shipped with atelier). */
export interface BuiltinEngineConfig {
  type: 'builtin';
  name: string;
}

/**
 * Remote engines. Credentials are referenced only by the NAME of an environment variable,
 * so a catalog file can be committed and published without leaking secrets.
 */
interface RemoteEngineBase {
  base_url: string;
  api_key_env?: string;
  upstream_model: string;
  timeout_ms?: number;
  /** Retries of one server after a 429, 408 or 5xx or a lost connection (default 2); chat retries only before the first byte. */
  max_retries?: number;
  /** First retry delay, doubled each time (default 200 ms); a longer Retry-After is honoured up to 5 s. */
  retry_backoff_ms?: number;
}

/** Another server tried, in order, when the one before it keeps failing (429, 5xx, timeouts). */
export interface ChatFallbackEndpoint {
  base_url: string;
  upstream_model: string;
  api_key_env?: string;
  timeout_ms?: number;
  /** As the engine's keep_alive_ms, for this server (default: the engine's). */
  keep_alive_ms?: number;
}

export interface OpenAiCompatibleEngineConfig extends RemoteEngineBase {
  type: 'openai-compatible';
  /**
   * How long an idle connection to the server is kept for the next call when the server does not
   * say (a `Keep-Alive: timeout=` header, which wins); default 4,000 ms, below the 5 s after
   * which common servers (uvicorn, Node) close an idle one without saying so. Longer spares a
   * caller who pauses a new TCP and TLS handshake, for a server known to keep connections open.
   */
  keep_alive_ms?: number;
  fallbacks?: ChatFallbackEndpoint[];
  /**
   * The server serves this fine-tune base model and loads LoRA adapters at run time (vLLM's
   * `POST {base_url}/load_lora_adapter`): checkpoints of that base model deploy to it.
   */
  lora_base_model?: string;
  /**
   * The server speaks OpenAI's Responses API (`POST {base_url}/responses`): a Responses request for
   * this model goes to it as it is (reasoning items, hosted tools and all), with the conversation of
   * previous_response_id rebuilt by atelier, instead of being translated to chat completions.
   */
  responses_api?: boolean;
  /**
   * The hosted tools (`web_search`, `file_search`, `code_interpreter`, `mcp`, `image_generation`...)
   * a caller may have a responses_api server run, on the operator's account. Default: none, only
   * the caller's own function, custom and namespace tools; others are dropped and named in
   * x-atelier-dropped-tools.
   */
  responses_tools?: string[];
}

/**
 * A server that speaks Anthropic's Messages API (`POST {base_url}/messages`, base_url such as
 * https://api.anthropic.com/v1): Messages requests go to it as they are (anthropic-beta forwarded);
 * chat completions and Responses requests are translated to Messages and back.
 */
export interface AnthropicEngineConfig extends RemoteEngineBase {
  type: 'anthropic';
  /** The anthropic-version header sent (default 2023-06-01). */
  version?: string;
  keep_alive_ms?: number;
  fallbacks?: ChatFallbackEndpoint[];
}

export interface OpenAiImagesEngineConfig extends RemoteEngineBase {
  type: 'openai-images';
}

export interface PredictionEngineConfig extends RemoteEngineBase {
  type: 'prediction';
  /** Pins a specific upstream model version when the provider supports it. */
  version?: string;
  /**
   * Which submit/poll/cancel protocol the provider speaks: Replicate predictions
   * (POST /predictions, GET urls.get, POST urls.cancel; the default) or the fal queue
   * (POST /<model>, GET status_url then response_url, PUT cancel_url).
   */
  style?: 'replicate' | 'fal';
}

export type EngineConfig =
  | BuiltinEngineConfig
  | OpenAiCompatibleEngineConfig
  | AnthropicEngineConfig
  | OpenAiImagesEngineConfig
  | PredictionEngineConfig;
export type EngineType = EngineConfig['type'];

export interface ChatFeatures {
  tools: boolean;
  json_mode: boolean;
  streaming: boolean;
}

interface ModelDefinitionBase {
  id: string;
  /** Other names the model answers to (ModelCatalog.get); never another model's id or alias. */
  aliases?: string[];
  /** The share taken off its price for a batch line (OpenAI's Batch API: 0.5, half price); absent: BATCH_DISCOUNT. */
  batch_discount?: number;
  /** Unix timestamp (seconds); fixed in the catalog so the public object is stable. */
  created: number;
  owned_by: string;
  display_name: string;
  description: string;
  capabilities: ModelCapabilities;
  engine: EngineConfig;
  /** Model-specific request parameters with UI hints; published as `request_schema`. */
  parameters: JsonSchemaObject;
}

export interface ChatModelDefinition extends ModelDefinitionBase {
  endpoint: '/chat/completions';
  pricing: TokenPricing;
  context_window: number;
  /** Used when the request sets neither max_tokens nor max_completion_tokens. */
  default_max_tokens: number;
  features: ChatFeatures;
}

export interface ImageGenerationModelDefinition extends ModelDefinitionBase {
  endpoint: '/images/generate';
  pricing: PerImagePricing;
}

export interface ImageEditModelDefinition extends ModelDefinitionBase {
  endpoint: '/images/edit';
  pricing: PerImagePricing;
}

export interface VideoModelDefinition extends ModelDefinitionBase {
  endpoint: '/videos/generate';
  pricing: PerVideoSecondPricing;
}

export interface EmbeddingModelDefinition extends ModelDefinitionBase {
  endpoint: '/embeddings';
  pricing: InputTokenPricing;
  /** Length of the vectors the model returns. */
  dimensions: number;
  /** The model can shorten its vectors (the request's `dimensions`, Matryoshka-style); default false. */
  supports_dimensions?: boolean;
  /** Most tokens one input may hold. */
  context_window: number;
  /** Most inputs one upstream call carries; a bigger request is split and reassembled in order (default 2,048). */
  max_batch?: number;
}

export type MediaModelDefinition =
  | ImageGenerationModelDefinition
  | ImageEditModelDefinition
  | VideoModelDefinition;

export type ModelDefinition = ChatModelDefinition | MediaModelDefinition | EmbeddingModelDefinition;

export interface ModelFilter {
  endpoint?: ModelEndpoint;
  /** Keeps models that accept this modality as input. */
  input?: Modality;
  /** Keeps models that produce this modality. */
  output?: Modality;
}

/** `sync` is the endpoint's own body; `queue` is the POST /api/ai/queue body for the same model. */
export type RequestMode = 'sync' | 'queue';

export interface PublicModel {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
  display_name: string;
  description: string;
  endpoint: ModelEndpoint;
  capabilities: ModelCapabilities;
  pricing: Pricing;
  request_schema: JsonSchemaObject;
  json_request_schema: JsonSchemaObject;
}

export interface ValidationIssue {
  /** Dotted path of the offending field (`num_inference_steps`, `messages[0].content`); '' for the body itself. */
  field: string;
  /** Human-readable message that names the field. */
  message: string;
  /** The JSON Schema keyword (or rule) that failed, for callers that branch on the kind of error. */
  keyword: string;
}

export type RequestBody = Record<string, unknown>;

export type ValidationResult =
  | { ok: true; value: RequestBody }
  | { ok: false; errors: ValidationIssue[] };

export interface ValidateOptions {
  mode?: RequestMode;
  /**
   * The caller hands the body over (a request body it just parsed and reads no further): schema
   * defaults are filled into it and `value` is that same object, instead of a deep copy.
   */
  inPlace?: boolean;
}
