import { readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The interactive reference at /docs is Swagger UI served from the swagger-ui-dist package
 * itself: no CDN, so it works offline and inside clusters without egress.
 */
export const SWAGGER_UI_ASSETS: Readonly<Record<string, string>> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'application/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

let distDir: string | undefined;
const cache = new Map<string, Buffer>();

/** One of the package's files by name (only the allow-listed ones), read once. */
export function swaggerUiAsset(name: string): { body: Buffer; contentType: string } | undefined {
  // Own keys only: `constructor` or `__proto__` would otherwise pass as an asset name.
  if (!Object.hasOwn(SWAGGER_UI_ASSETS, name)) return undefined;
  const contentType = SWAGGER_UI_ASSETS[name];
  distDir ??= path.dirname(require.resolve('swagger-ui-dist/package.json'));
  let body = cache.get(name);
  if (!body) {
    body = readFileSync(path.join(distDir, name));
    cache.set(name, body);
  }
  return { body, contentType };
}

/** The page: Swagger UI pointed at the document, with "Authorize" for the bearer key. */
export function swaggerUiPage(opts: { specUrl: string; assetBase: string; title: string }): string {
  const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>${esc(opts.title)}</title>
  <link rel="icon" type="image/png" href="${esc(opts.assetBase)}/favicon-32x32.png">
  <link rel="stylesheet" href="${esc(opts.assetBase)}/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="${esc(opts.assetBase)}/swagger-ui-bundle.js"></script>
  <script>
    window.ui = SwaggerUIBundle({ url: ${JSON.stringify(opts.specUrl)}, dom_id: '#swagger-ui', deepLinking: true, persistAuthorization: true });
  </script>
</body>
</html>
`;
}
