export { BatchRoutesModule } from './batch-routes.module';
export { FilesService, fileId, fileObject, fileUuid } from './files.service';
export { FilesRepository } from './files.repository';
export { FilesSweeper } from './files-sweeper.service';
export { BATCH_ENDPOINTS, MAX_BATCH_LINES, batchEndpoint, checkBatchInput, type BatchEndpoint, type BatchInputCheck, type BatchInputError } from './batch-input';
