import { Module } from '@nestjs/common';
import { AuthModule } from '@atelier/auth';
import { ModelsController } from './models.controller';

/** The model catalog's HTTP routes on the gateway (needs the global ModelCatalogModule), with the caller's deployed fine-tunes. */
@Module({ imports: [AuthModule], controllers: [ModelsController] })
export class ModelsRoutesModule {}
