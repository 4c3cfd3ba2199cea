export { BatchRoutesModule } from './batch-routes.module';
export { FilesService, fileId, fileObject, fileUuid } from './files.service';
export { FilesRepository } from './files.repository';
