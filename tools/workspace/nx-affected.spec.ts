import { execFileSync } from 'node:child_process';
import { appendFileSync, copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const root = path.resolve(__dirname, '../..');
const nxBin = path.join(root, 'node_modules/nx/dist/bin/nx.js');
const env = { ...process.env, NX_DAEMON: 'false', NX_NO_CLOUD: 'true', NX_SKIP_NX_CACHE: 'true', NODE_OPTIONS: '' };

/** Project folders (apps/*, libs/*, any dir with a project.json) and their names. */
function projects(): Map<string, string> {
  const byRoot = new Map<string, string>();
  for (const group of ['apps', 'libs', '.'])
    for (const dir of readdirSync(path.join(root, group))) {
      const file = path.join(root, group, dir, 'project.json');
      try {
        byRoot.set(path.posix.join(group, dir).replace(/^\.\//, ''), JSON.parse(readFileSync(file, 'utf8')).name);
      } catch {
        // not a project
      }
    }
  return byRoot;
}

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'generated' ? [] : tsFiles(full);
    return e.name.endsWith('.ts') ? [full] : [];
  });
}

/** What each project imports through the @atelier/* aliases: the graph Nx should infer. */
function importGraph(): Map<string, Set<string>> {
  const byRoot = projects();
  const paths = JSON.parse(readFileSync(path.join(root, 'tsconfig.base.json'), 'utf8')).compilerOptions.paths as Record<string, string[]>;
  const aliasToProject = new Map(
    Object.entries(paths).map(([alias, [target]]) => [alias, byRoot.get(path.posix.normalize(target).split('/').slice(0, 2).join('/'))!]),
  );
  const graph = new Map<string, Set<string>>();
  for (const [dir, name] of byRoot) {
    const deps = new Set<string>();
    for (const file of tsFiles(path.join(root, dir)))
      for (const m of readFileSync(file, 'utf8').matchAll(/from '(@atelier\/[\w-]+)'/g)) {
        const dep = aliasToProject.get(m[1]);
        if (dep && dep !== name) deps.add(dep);
      }
    graph.set(name, deps);
  }
  return graph;
}

/** A project and everything that depends on it, directly or not. */
function dependents(graph: Map<string, Set<string>>, changed: string): string[] {
  const out = new Set([changed]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [p, deps] of graph) if (!out.has(p) && [...deps].some((d) => out.has(d))) grew = out.add(p) && true;
  }
  return [...out].sort();
}

/**
 * `nx affected` on a throwaway commit in a copy of this working tree (never in the repo itself):
 * the Nx graph matches the imports, and a change runs exactly the projects it touches.
 */
describe('nx project graph and affected', () => {
  let clone: string;
  const git = (...args: string[]) => execFileSync('git', ['-c', 'user.email=ci@atelier.test', '-c', 'user.name=ci', ...args], { cwd: clone, env, encoding: 'utf8' });
  const nx = (...args: string[]) => execFileSync(process.execPath, [nxBin, ...args], { cwd: clone, env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  const commitChange = (file: string) => {
    appendFileSync(path.join(clone, file), '\n// throwaway change\n');
    git('commit', '-qam', `touch ${file}`);
  };
  const affected = () => (JSON.parse(nx('show', 'projects', '--affected', '--base=HEAD~1', '--head=HEAD', '--json')) as string[]).sort();
  const graph = importGraph();

  beforeAll(() => {
    clone = mkdtempSync(path.join(tmpdir(), 'atelier-affected-'));
    const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard'], { cwd: root, encoding: 'utf8' }).split('\n').filter(Boolean);
    for (const file of files) {
      const from = path.join(root, file);
      if (!statSync(from, { throwIfNoEntry: false })?.isFile()) continue;
      mkdirSync(path.dirname(path.join(clone, file)), { recursive: true });
      copyFileSync(from, path.join(clone, file));
    }
    symlinkSync(path.join(root, 'node_modules'), path.join(clone, 'node_modules'), 'dir');
    git('init', '-q', '-b', 'main');
    git('add', '-A');
    git('commit', '-qm', 'base');
  }, 60_000);
  afterAll(() => rmSync(clone, { recursive: true, force: true }));

  it('infers every project dependency from the imports', () => {
    const file = path.join(clone, 'graph.json');
    nx('graph', `--file=${file}`);
    const nxGraph = JSON.parse(readFileSync(file, 'utf8')).graph.dependencies as Record<string, { target: string }[]>;
    for (const [project, deps] of graph)
      expect({ project, deps: nxGraph[project].map((d) => d.target).filter((d) => !d.startsWith('npm:')).sort() }).toEqual({ project, deps: [...deps].sort() });
  }, 60_000);

  it('runs only an app when only the app changes', () => {
    commitChange('apps/fine-tune/src/fine-tune.module.ts');
    expect(affected()).toEqual(['fine-tune']);
    const tasks = path.join(clone, 'tasks.json');
    nx('affected', '-t', 'lint', 'test', 'build', '--base=HEAD~1', '--head=HEAD', `--graph=${tasks}`);
    expect(Object.keys(JSON.parse(readFileSync(tasks, 'utf8')).tasks.tasks).sort()).toEqual(['fine-tune:build', 'fine-tune:lint', 'fine-tune:test']);
  }, 60_000);

  it('runs a lib and exactly the projects that import it, directly or not', () => {
    commitChange('libs/safe-fetch/src/fetch-media.ts');
    const expected = dependents(graph, 'safe-fetch');
    expect(expected).toEqual(expect.arrayContaining(['safe-fetch', 'media-lib', 'media', 'queue-lib', 'queue-worker', 'gateway', 'fine-tune-lib', 'fine-tune']));
    expect(expected).not.toContain('events');
    expect(affected()).toEqual(expected);
  }, 60_000);
});
