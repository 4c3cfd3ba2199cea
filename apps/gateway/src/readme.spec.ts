import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { ModelCatalog } from '@atelier/models';
import { buildOpenApiDocument } from '@atelier/openapi';
import { repoRoot } from '@atelier/testing';

/**
 * The README is what a new user reads first, and docs/ what they read next; they once kept saying
 * the endpoints "come next" long after they worked. The OpenAPI document is checked against the
 * gateway's registered routes (openapi.spec.ts), so holding the docs to it keeps them true to the
 * gateway.
 */
describe('README and docs/', () => {
  const read = (file: string) => readFileSync(path.join(repoRoot, file), 'utf8');
  const pages = ['README.md', ...readdirSync(path.join(repoRoot, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  const readme = pages.map(read).join('\n');
  const architecture = read('docs/architecture.md');
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

  it('keeps the README to what a newcomer needs first, with a map of the docs that lists every page', () => {
    const own = read('README.md');
    expect(own.split('\n').length).toBeLessThan(200);
    for (const page of pages.filter((p) => p.startsWith('docs/'))) expect({ page, listed: own.includes(`](${page})`) }).toEqual({ page, listed: true });
  });

  it('names every lib and app, with the tags its project.json carries, in the architecture tables', () => {
    const table = (header: string) => {
      const start = architecture.indexOf(header);
      expect(start).toBeGreaterThan(-1);
      const lines = architecture.slice(start).split('\n');
      const body = lines.slice(2, lines.findIndex((l, i) => i > 0 && !l.startsWith('|')));
      return new Map(body.map((l) => l.split('|').map((c) => c.trim())).map((c) => [c[1], c[2]]));
    };
    const libs = table('| Lib | Tags | Contents |');
    const apps = table('| App | Role |');
    const tags = (group: string, name: string) =>
      (JSON.parse(readFileSync(path.join(repoRoot, group, name, 'project.json'), 'utf8')) as { tags: string[] }).tags.map((t) => `\`${t}\``).join(' ');
    const listed = (dir: string) => readdirSync(path.join(repoRoot, dir)).sort();
    expect([...libs.keys()].sort()).toEqual(listed('libs'));
    expect([...apps.keys()].sort()).toEqual(listed('apps'));
    for (const name of listed('libs')) expect({ [name]: libs.get(name) }).toEqual({ [name]: tags('libs', name) });
  });
});
