export { buildOpenApiDocument, openApiPath, type OpenApiOptions } from './openapi-document';
export { responseSchemas } from './response-schemas';
export { swaggerUiAsset, swaggerUiPage, SWAGGER_UI_ASSETS } from './swagger-ui';
export { ApiDocsModule } from './api-docs.module';
