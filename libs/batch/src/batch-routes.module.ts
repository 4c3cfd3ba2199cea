import { Module } from '@nestjs/common';
import { AuthModule } from '@atelier/auth';
import { BillingModule } from '@atelier/billing';
import { BatchesController } from './batches.controller';
import { BatchEvents } from './batch-events.service';
import { BatchesRepository } from './batches.repository';
import { BatchesService } from './batches.service';
import { BatchFilesController } from './files.controller';
import { FilesRepository } from './files.repository';
import { FilesService } from './files.service';
import { FilesSweeper } from './files-sweeper.service';

/** The batch feature's HTTP routes on the gateway (files, batches), beside the services they call; needs StorageModule from the app. */
@Module({
  imports: [AuthModule, BillingModule],
  controllers: [BatchFilesController, BatchesController],
  providers: [FilesService, FilesRepository, FilesSweeper, BatchesService, BatchesRepository, BatchEvents],
})
export class BatchRoutesModule {}
