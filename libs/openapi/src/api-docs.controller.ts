import { Controller, Get, Inject, Param, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { PublicRoute } from '@atelier/auth';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ApiError } from '@atelier/contracts';
import { ModelCatalog } from '@atelier/models';
import { buildOpenApiDocument } from './openapi-document';
import { swaggerUiAsset, swaggerUiPage } from './swagger-ui';

export const API_VERSION = '0.1.0';

/** GET /api/openapi.json (the whole public API, OpenAPI 3.1) and the interactive reference at /docs. */
@PublicRoute()
@Controller()
export class ApiDocsController {
  /** The catalog is fixed once loaded, so the document is built once. */
  private document?: Record<string, unknown>;

  constructor(
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  @Get('api/openapi.json')
  openapi() {
    this.document ??= buildOpenApiDocument({
      catalog: this.catalog,
      adminEnabled: Boolean(this.config.ADMIN_TOKEN),
      version: API_VERSION,
      serverUrl: this.config.PUBLIC_URL,
    });
    return this.document;
  }

  @Get('docs')
  async page(@Res() reply: FastifyReply): Promise<void> {
    await reply
      .header('content-type', 'text/html; charset=utf-8')
      .send(swaggerUiPage({ specUrl: '/api/openapi.json', assetBase: '/docs/assets', title: 'atelier API reference' }));
  }

  @Get('docs/assets/:file')
  async asset(@Param('file') file: string, @Res() reply: FastifyReply): Promise<void> {
    const asset = swaggerUiAsset(file);
    if (!asset) throw ApiError.notFound(`No such documentation asset: ${file}`);
    await reply.header('content-type', asset.contentType).header('cache-control', 'public, max-age=86400').send(asset.body);
  }
}
