// Compiled apps resolve @atelier/* through .swcrc's paths, the type checker through
// tsconfig.base.json's: a lib added to one and not the other builds, type-checks, then fails at
// start with "Cannot find module".
import { readFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(__dirname, '../..');
const read = (file: string) => JSON.parse(readFileSync(path.join(root, file), 'utf8'));
const normalize = (paths: Record<string, string[]>) =>
  Object.fromEntries(Object.entries(paths).map(([alias, targets]) => [alias, targets.map((t) => t.replace(/^\.\//, ''))]));

it('.swcrc resolves every @atelier path alias exactly as tsconfig.base.json does', () => {
  expect(normalize(read('.swcrc').jsc.paths)).toEqual(normalize(read('tsconfig.base.json').compilerOptions.paths));
});
