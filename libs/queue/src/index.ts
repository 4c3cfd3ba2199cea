export { GenerationQueue, MAX_PAGE_SIZE, mediaTypeOf, queueFor, type ListQuery } from './generation-queue.service';
export { GenerationState, generationReservationRule } from './generation-state';
export { toGenerationRecord, RECORD_FIELDS, type GenerationRecord } from './generation-record';
export { QueueGatewayModule } from './queue-gateway.module';
export { GenerationRunner, type RunOutcome } from './generation-runner';
export { GenerationSweeper } from './generation-sweeper.service';
export { ImageGenerationProcessor, VideoGenerationProcessor } from './generation.processor';
export { QueueServiceModule } from './queue-service.module';
