// Every project's tests in one run (`npm test`); `nx test <project>` runs one of them.
const { readdirSync, existsSync } = require('node:fs');
const path = require('node:path');

const projects = [];
for (const group of ['apps', 'libs']) {
  for (const name of readdirSync(path.join(__dirname, group))) {
    const config = path.join(__dirname, group, name, 'jest.config.cjs');
    if (existsSync(config)) projects.push(config);
  }
}
projects.push(path.join(__dirname, 'tools/db/jest.config.cjs'));
projects.push(path.join(__dirname, 'deploy/jest.config.cjs'));
projects.push(path.join(__dirname, 'tools/workspace/jest.config.cjs'));
projects.push(path.join(__dirname, 'tools/bench/jest.config.cjs'));
projects.push(path.join(__dirname, 'examples/jest.config.cjs'));

// testTimeout is a global option: Jest ignores it in a project's config (the preset's), so it is set here.
// workerIdleMemoryLimit too: under --experimental-vm-modules a worker keeps some of every test file's module graph,
// and one worker that ran a long share of the suites reached V8's 4 GB heap limit in a clean-clone CI run
// (2026-12-07). Past the limit, the worker is replaced between files.
module.exports = { projects, testTimeout: 30000, workerIdleMemoryLimit: '1536MB' };
