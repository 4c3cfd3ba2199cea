import nx from '@nx/eslint-plugin';
import tseslint from 'typescript-eslint';

export default [
  { ignores: ['**/dist', '**/node_modules', 'libs/db/src/generated/**', '.tools/**', '.nx/**'] },
  ...tseslint.configs.recommended,
  { files: ['**/*.cjs'], rules: { '@typescript-eslint/no-require-imports': 'off' }, languageOptions: { globals: { require: 'readonly', module: 'writable', __dirname: 'readonly' } } },
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
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['@atelier/*/**'], message: 'Import a lib through its public API (@atelier/<lib>), never its files.' }] },
      ],
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
            { sourceTag: 'type:app', onlyDependOnLibsWithTags: ['type:contracts', 'type:util', 'type:data', 'type:runtime', 'type:domain', 'type:testing'] },
          ],
        },
      ],
    },
  },
  {
    // Tests of any layer may use the shared test helpers.
    files: ['**/*.spec.ts'],
    rules: {
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
    files: ['libs/config/**/*.ts', 'libs/testing/**/*.ts', '**/*.spec.ts', 'tools/**'],
    rules: { 'no-restricted-syntax': 'off' },
  },
];
