export { FineTuneGatewayModule } from './fine-tune-gateway.module';
export { FineTuneServiceModule } from './fine-tune-service.module';
export { TokenizeProcessor } from './tokenize.processor';
export { FineTunesService, toFineTuneView, type FineTuneView } from './fine-tunes.service';
export { FineTuneTokenization, DatasetUnusableError, type TokenizationRunContext } from './fine-tune-tokenization.service';
export {
  BASE_MODELS,
  SCRIPT_TYPES,
  SUPPORTED_BASE_MODELS,
  baseModelSpec,
  isScriptType,
  type BaseModelName,
  type BaseModelSpec,
  type ChatFormat,
  type ScriptType,
  type TokenizerFamily,
} from './base-models';
export { TRAINING_PARAMS, TIMESTEP_TYPES, SAVE_STRATEGIES, validateTrainingParams, referencedColumns, type FieldProblem, type ParamSpec } from './training-params';
export { parseCreateFineTune, parseResource, invalidFineTune, type CreateFineTuneRequest } from './fine-tune-request';
export { FINE_TUNE_STATES, RUNNING_STATES, isFineTuneState, type FineTuneState } from './fine-tune-states';
export { renderChat, type ChatMessage } from './chat-templates';
export { TokenizerRegistry, type TokenCounter } from './tokenizers';
export { blobAsyncBuffer, openParquet, readRowWindows, ParquetReadError, type ParquetDataset } from './parquet-dataset';
export { tokenizeDataset, estimateCost, LengthStats, type TokenizationStats, type TokenizeOptions } from './tokenize-dataset';
export { createFineTuneJsonSchema, trainingParamsJsonSchema } from './fine-tune-json-schema';
export { baseModelListing, exampleCreateBody, type ScriptTypeListing } from './base-model-listing';
export { FineTuneRoutesModule } from './fine-tune-routes.module';
export { describeImage, StyleLearner, STYLE_SAMPLE_SIZE, type ImageStyleState } from './image-style-learning';
