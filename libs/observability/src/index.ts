export { FastHistogram } from './fast-histogram';
export { Metrics, creditAmount, timedStage, type GenerationMode, type GenerationOutcome, type JobOutcome } from './metrics';
export { requestContext, type RequestContext } from './request-context';
export { JsonLogger, PrettyLogger, type LogLevelName } from './json-logger';
export { TopLabels } from './top-labels';
export { SpanKind, SpanStatusCode, tracing, type Span, type TracingSettings } from './tracing';
