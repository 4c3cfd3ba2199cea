// Shared Jest settings. Nest 12 is ESM-only; tests run as CommonJS compiled by SWC and
// load Nest through Node's require(esm), which Jest only allows with --experimental-vm-modules
// (set by the npm scripts / nx targets).
const fs = require('node:fs');
const path = require('node:path');

const root = __dirname;
const swc = JSON.parse(fs.readFileSync(path.join(root, '.swcrc'), 'utf8'));
delete swc.$schema;
// .swcrc's exclude keeps specs and harnesses out of builds; Jest compiles exactly those.
delete swc.exclude;
delete swc.jsc.baseUrl;
delete swc.jsc.paths;

const tsconfig = JSON.parse(fs.readFileSync(path.join(root, 'tsconfig.base.json'), 'utf8'));
const moduleNameMapper = {};
for (const [alias, [target]] of Object.entries(tsconfig.compilerOptions.paths)) {
  moduleNameMapper[`^${alias.replace(/[/\\^$*+?.()|[\]{}]/g, '\\$&')}$`] = path.join(root, target);
}

module.exports = {
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['@swc/jest', { ...swc, swcrc: false }] },
  moduleFileExtensions: ['ts', 'js', 'json'],
  moduleNameMapper,
  testMatch: ['**/?(*.)+(spec|test).ts'],
  testTimeout: 30000,
};
