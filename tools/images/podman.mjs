// podman as these machines need it, for `npm run images` and `npm run images:smoke`: runc (crun
// refuses hybrid cgroups), cgroupfs (no systemd), and no default ulimits (podman's exceed the
// hard limits of a container host or CI runner). PODMAN_ARGS overrides the global flags.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { root } from '../bootstrap.mjs';

export const version = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).version;
export const workDir = path.join(root, 'var/images');

/** The image names the manifests and docker-compose.yml use (deploy/manifests.spec.ts). */
export const imageName = (app) => `atelier/${app}:${version}`;

const globalArgs = (process.env.PODMAN_ARGS ?? '--runtime runc --cgroup-manager=cgroupfs').split(/\s+/).filter(Boolean);

function environment() {
  if (process.env.CONTAINERS_CONF) return process.env;
  mkdirSync(workDir, { recursive: true });
  const conf = path.join(workDir, 'containers.conf');
  writeFileSync(conf, '[containers]\ndefault_ulimits = []\n');
  return { ...process.env, CONTAINERS_CONF: conf };
}
const env = environment();

export function podmanAvailable() {
  return spawnSync('podman', ['--version'], { encoding: 'utf8' }).status === 0;
}

/** Runs podman to completion; its output is returned, or shown as it comes with `inherit`. */
export function podman(args, { inherit = false, allowFail = false, input } = {}) {
  const r = spawnSync('podman', [...globalArgs, ...args], {
    cwd: root,
    env,
    input,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    stdio: inherit ? ['ignore', 'inherit', 'inherit'] : ['pipe', 'pipe', 'pipe'],
  });
  if (r.status !== 0 && !allowFail) throw new Error(`podman ${args.join(' ')} failed (exit ${r.status ?? r.signal})${inherit ? '' : `:\n${r.stderr}`}`);
  return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}

/** podman in the background, e.g. `podman wait` for several containers at once. */
export function podmanAsync(args) {
  return new Promise((resolve) => {
    const child = spawn('podman', [...globalArgs, ...args], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

export const imageExists = (name) => podman(['image', 'exists', name], { allowFail: true }).status === 0;
