export { buildOpenApiDocument, openApiPath, type OpenApiOptions } from './openapi-document';
export { RESPONSE_SCHEMAS } from './response-schemas';
export { swaggerUiAsset, swaggerUiPage, SWAGGER_UI_ASSETS } from './swagger-ui';
export { ApiDocsModule } from './api-docs.module';
