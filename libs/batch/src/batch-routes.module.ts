import { Module } from '@nestjs/common';
import { AuthModule } from '@atelier/auth';
import { BatchFilesController } from './files.controller';
import { FilesRepository } from './files.repository';
import { FilesService } from './files.service';
import { FilesSweeper } from './files-sweeper.service';

/** The batch feature's HTTP routes on the gateway (files so far), beside the services they call; needs StorageModule from the app. */
@Module({ imports: [AuthModule], controllers: [BatchFilesController], providers: [FilesService, FilesRepository, FilesSweeper] })
export class BatchRoutesModule {}
