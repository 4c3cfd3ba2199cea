import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ModelCatalog } from '@atelier/models';
import { buildOpenApiDocument } from '@atelier/openapi';
import { repoRoot } from '@atelier/testing';

/**
 * The README is what a new user reads first; it once kept saying the endpoints "come next" long
 * after they worked. The OpenAPI document is checked against the gateway's registered routes
 * (openapi.spec.ts), so holding the README to it keeps the README true to the gateway.
 */
describe('README', () => {
  const readme = readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
  const normalize = (p: string) => p.replace(/\{[^}]+\}/g, '{}');
  const document = buildOpenApiDocument({ catalog: ModelCatalog.fromDirectory(), adminEnabled: true, version: 'test' }) as {
    paths: Record<string, Record<string, unknown>>;
  };

  it('documents every /api route the gateway serves', () => {
    const documented = normalize(readme);
    const missing = Object.keys(document.paths)
      .filter((p) => p.startsWith('/api/') && !p.startsWith('/api/openapi'))
      .filter((p) => !documented.includes(normalize(p)));
    expect(missing).toEqual([]);
  });

  it('does not describe what already works as still to come', () => {
    expect(readme).not.toMatch(/come next|no handlers yet|not implemented yet|coming soon/i);
  });
});
