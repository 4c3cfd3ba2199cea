import { Module } from '@nestjs/common';
import { ModelsController } from './models.controller';

/** The model catalog's HTTP routes on the gateway (needs the global ModelCatalogModule). */
@Module({ controllers: [ModelsController] })
export class ModelsRoutesModule {}
