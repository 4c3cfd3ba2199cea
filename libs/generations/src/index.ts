export { GenerationQueue, MAX_PAGE_SIZE, mediaTypeOf, queueFor, type ListQuery } from './generation-queue.service';
export { GenerationState } from './generation-state';
export { toGenerationRecord, RECORD_FIELDS, type GenerationRecord } from './generation-record';
export { GenerationsModule } from './generations.module';
export { GenerationRenderer, type RenderResult, type RenderTarget } from './generation-renderer';
export { GenerationRunner, type RunOutcome } from './generation-runner';
