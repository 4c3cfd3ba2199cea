import { Module } from '@nestjs/common';
import { ApiDocsController } from './api-docs.controller';

/** The OpenAPI document and Swagger UI on the gateway (needs the global ModelCatalogModule). */
@Module({ controllers: [ApiDocsController] })
export class ApiDocsModule {}
