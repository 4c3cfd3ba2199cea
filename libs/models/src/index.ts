export type {
  EmbeddingModelDefinition,
  InputTokenPricing,
  BuiltinEngineConfig,
  ChatFallbackEndpoint,
  ChatFeatures,
  ChatModelDefinition,
  DecimalString,
  EngineConfig,
  EngineType,
  ImageEditModelDefinition,
  ImageGenerationModelDefinition,
  JsonSchema,
  JsonSchemaObject,
  JsonType,
  JsonValue,
  MediaModelDefinition,
  Modality,
  ModelCapabilities,
  ModelDefinition,
  ModelEndpoint,
  ModelFilter,
  OpenAiCompatibleEngineConfig,
  AnthropicEngineConfig,
  OpenAiImagesEngineConfig,
  PerImagePricing,
  PerVideoSecondPricing,
  PredictionEngineConfig,
  Pricing,
  PricingMethod,
  PublicModel,
  RenderType,
  RequestBody,
  RequestMode,
  TokenPricing,
  ValidateOptions,
  ValidationIssue,
  ValidationResult,
  VideoModelDefinition,
} from './model-types';
export { MODALITIES, MODEL_ENDPOINTS } from './model-types';
export { ModelCatalog, ModelCatalogError, defaultCatalogDir } from './model-catalog';
export {
  ENDPOINT_CONTRACTS,
  JSON_SCHEMA_DIALECT,
  MAX_EMBEDDING_INPUTS,
  RESERVED_PARAMETERS,
  buildJsonRequestSchema,
  buildRequestSchema,
  supportsQueue,
  type EndpointContract,
} from './model-schema';
export { validateModelRequest } from './model-validation';
export { toPublicModel } from './public-model';
export { ModelCatalogModule } from './model-catalog.module';
export { ModelsRoutesModule } from './models-routes.module';
export { DeployedModels, deployedDefinition, deployedModelObject, LOCAL_CHAT_BASE_MODEL, LOCAL_IMAGE_BASE_MODEL, type DeployedModelView, type ModelAdapter } from './deployed-models.service';
export { LoraAdapters } from './lora-adapters.service';
export { loraAdapterName } from './lora-adapter-name';
