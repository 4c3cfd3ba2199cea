import nx from '@nx/eslint-plugin';
import globals from 'globals';
import tseslint from 'typescript-eslint';

const DEEP_IMPORT = { group: ['@atelier/*/**'], message: 'Import a lib through its public API (@atelier/<lib>), never its files.' };
// Harnesses (*.harness.ts) are test code beside the specs; builds leave them out (.swcrc exclude).
const HARNESS_IMPORT = { group: ['**/*.harness'], message: 'Test harnesses are for specs only; production code must not import them.' };

/**
 * The data layer: repositories (*.repository.ts; the ledger's statements and the idempotency store
 * are the same role under older names) are the only code that speaks Prisma or SQL; services and
 * controllers receive a repository (docs/architecture.md, "Layers"). A use case that spans
 * repositories in one transaction passes the repository's opaque transaction handle along.
 */
const DATA_ACCESS = {
  name: '@atelier/db',
  importNames: ['PrismaService', 'SqlPool', 'createPgPool', 'createPrismaClient'],
  message: 'Only repositories (*.repository.ts) speak Prisma or SQL: put the query in one and inject it (docs/architecture.md, "Layers").',
};
const DATA_LAYER = ['**/*.repository.ts', 'libs/db/**', 'libs/testing/**', 'libs/billing/src/credit-statements.ts', 'libs/billing/src/*credit-ledger.service.ts', 'libs/idempotency/src/idempotency-store.service.ts', 'libs/runtime/src/health.ts'];

/**
 * One scope per feature (route, controller, lib, app and queue share its word) plus `shared`
 * (platform libs) and `edge` (the gateway and its API docs). A feature reaches only the shared
 * libs and, where it really builds on one, another feature's public API: the queue renders
 * through media's MediaRenderer, fine-tune reads datasets from repos, chat exports stored completions
 * into repos as datasets, batch runs its lines through
 * chat's request checks and the queue's fair order. The queue-worker app runs queue and batch.
 */
const SCOPE_CONSTRAINTS = [
  { sourceTag: 'scope:shared', onlyDependOnLibsWithTags: ['scope:shared'] },
  { sourceTag: 'scope:chat', onlyDependOnLibsWithTags: ['scope:shared', 'scope:chat', 'scope:repos'] },
  { sourceTag: 'scope:media', onlyDependOnLibsWithTags: ['scope:shared', 'scope:media'] },
  { sourceTag: 'scope:queue', onlyDependOnLibsWithTags: ['scope:shared', 'scope:queue', 'scope:media'] },
  { sourceTag: 'scope:events', onlyDependOnLibsWithTags: ['scope:shared', 'scope:events'] },
  { sourceTag: 'scope:repos', onlyDependOnLibsWithTags: ['scope:shared', 'scope:repos'] },
  { sourceTag: 'scope:fine-tune', onlyDependOnLibsWithTags: ['scope:shared', 'scope:fine-tune', 'scope:repos'] },
  { sourceTag: 'scope:batch', onlyDependOnLibsWithTags: ['scope:shared', 'scope:batch', 'scope:chat', 'scope:queue', 'scope:media'] },
  { sourceTag: 'scope:queue-worker', onlyDependOnLibsWithTags: ['scope:shared', 'scope:queue', 'scope:batch'] },
  { sourceTag: 'scope:edge', onlyDependOnLibsWithTags: ['scope:shared', 'scope:edge', 'scope:chat', 'scope:media', 'scope:queue', 'scope:events', 'scope:repos', 'scope:fine-tune', 'scope:batch'] },
];

export default [
  { ignores: ['**/dist', '**/node_modules', 'libs/db/src/generated/**', '.tools/**', '.nx/**'] },
  ...tseslint.configs.recommended,
  { files: ['**/*.cjs'], rules: { '@typescript-eslint/no-require-imports': 'off' }, languageOptions: { globals: { require: 'readonly', module: 'writable', __dirname: 'readonly' } } },
  // Scripts (tools, examples, deploy) are plain JavaScript, where no type checker catches a name
  // used after its definition was removed: no-undef does.
  { files: ['**/*.mjs'], languageOptions: { globals: globals.node }, rules: { 'no-undef': 'error' } },
  {
    files: ['**/*.ts'],
    plugins: { '@nx': nx },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-syntax': [
        'error',
        {
          selector: "MemberExpression[object.name='process'][property.name='env']",
          message: 'Read settings from the validated AppConfig (@atelier/config), not process.env.',
        },
      ],
      'no-restricted-imports': ['error', { patterns: [DEEP_IMPORT, HARNESS_IMPORT] }],
      '@nx/enforce-module-boundaries': [
        'error',
        {
          enforceBuildableLibDependency: false,
          allow: [],
          banTransitiveDependencies: false,
          depConstraints: [
            { sourceTag: 'type:contracts', onlyDependOnLibsWithTags: ['type:contracts'] },
            { sourceTag: 'type:util', onlyDependOnLibsWithTags: ['type:contracts', 'type:util'] },
            { sourceTag: 'type:data', onlyDependOnLibsWithTags: ['type:contracts', 'type:util'] },
            { sourceTag: 'type:runtime', onlyDependOnLibsWithTags: ['type:contracts', 'type:util', 'type:data'] },
            { sourceTag: 'type:domain', onlyDependOnLibsWithTags: ['type:contracts', 'type:util', 'type:data', 'type:runtime', 'type:domain'] },
            { sourceTag: 'type:testing', onlyDependOnLibsWithTags: ['type:contracts', 'type:util', 'type:data', 'type:runtime', 'type:domain'] },
            // Production code never reaches test helpers; specs and harnesses may (override below).
            { sourceTag: 'type:app', onlyDependOnLibsWithTags: ['type:contracts', 'type:util', 'type:data', 'type:runtime', 'type:domain'] },
            ...SCOPE_CONSTRAINTS,
          ],
        },
      ],
    },
  },
  {
    files: ['libs/**/*.ts', 'apps/**/*.ts'],
    ignores: ['**/*.spec.ts', '**/*.harness.ts', ...DATA_LAYER],
    rules: { 'no-restricted-imports': ['error', { paths: [DATA_ACCESS], patterns: [DEEP_IMPORT, HARNESS_IMPORT] }] },
  },
  {
    // Tests of any layer, and the harnesses beside them, may use the shared test helpers.
    files: ['**/*.spec.ts', '**/*.harness.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [DEEP_IMPORT] }],
      '@nx/enforce-module-boundaries': [
        'error',
        {
          enforceBuildableLibDependency: false,
          depConstraints: [{ sourceTag: '*', onlyDependOnLibsWithTags: ['*'] }],
        },
      ],
    },
  },
  {
    // The config lib is the one place allowed to read the environment.
    files: ['libs/config/**/*.ts', 'libs/testing/**/*.ts', '**/*.spec.ts', '**/*.harness.ts', 'tools/**'],
    rules: { 'no-restricted-syntax': 'off' },
  },
];
