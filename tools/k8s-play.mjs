#!/usr/bin/env node
// `npm run k8s:play`: the dev overlay's Kubernetes objects, run for real with `podman kube play`
// against the images `npm run images` built, this machine's Postgres (a fresh database) and a
// throwaway Redis. The migration Job runs first and must exit 0; then every Deployment starts
// from the same objects a cluster gets (its ConfigMap and Secrets through envFrom, its security
// context: uid 1000, read-only root file system with the emptyDir on /tmp, no capabilities; its
// resource limits and probes); then the checks of `npm run images:smoke` run through the gateway.
// What kube play cannot run (Services, HPA, KEDA, PodDisruptionBudgets) is left out, and what
// this machine needs changed is changed here, each said below and in deploy/README.md.
//   K8S_PLAY_KEEP=1 leaves the pods running (`podman kube down var/k8s-play/played.yaml` stops them).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { render } from '../deploy/manifests.mjs';
import { APPS, READINESS_PATH } from './apps.mjs';
import { ensureRuntime, reachable, root } from './bootstrap.mjs';
import { checkThroughGateway, expect } from './images/gateway-checks.mjs';
import { imageExists, imageName, podman, podmanAvailable, workDir } from './images/podman.mjs';

ensureRuntime();
const { default: pg } = await import('pg');
const { freePort } = await import('./bench/bench-env.mjs');

const PLAYED = new Set(['ConfigMap', 'Secret', 'Deployment', 'Job']);
const run = randomBytes(4).toString('hex');
const cleanups = [];
const dir = path.join(workDir, '..', 'k8s-play');
const step = (message) => console.log(`k8s:play | ${message}`);

async function until(what, check, timeoutMs = 120_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/**
 * The app containers (not the pods' infra containers) of the pods whose names start with `pod`:
 * kube play names a container `<pod>-<container>`, and a Deployment's pods `<name>-pod-<n>`.
 */
const containersOf = (pod) =>
  JSON.parse(podman(['ps', '-a', '--format', 'json'], { allowFail: true }).stdout || '[]').filter((c) => !c.IsInfra && c.Names?.[0]?.startsWith(`${pod}-`));

/** The app a Deployment or Job runs, from its image (atelier/<app>:<version>). */
const appOf = (container) => /^atelier\/([a-z-]+):/.exec(container.image)?.[1];

async function main() {
  if (!podmanAvailable()) throw new Error('podman is missing: apt-get install podman runc, then npm run images');
  for (const app of ['migrate', ...APPS.map((a) => a.name)]) if (!imageExists(imageName(app))) throw new Error(`${imageName(app)} is missing: npm run images`);

  const objects = render(path.join(root, 'deploy/overlays/dev'));
  const left = [...new Set(objects.filter((o) => !PLAYED.has(o.kind)).map((o) => o.kind))];
  step(`rendered deploy/overlays/dev: ${objects.length} objects; played: ${[...PLAYED].join(', ')}; not by kube play: ${left.join(', ')} (deploy/README.md)`);

  // This machine's Postgres (a database of its own) and a throwaway Redis stand in for the overlay's in-cluster ones.
  const adminUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
  const database = `atelier_k8s_play_${run}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  cleanups.push(async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  });
  const redisPort = await freePort();
  const redis = spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  cleanups.push(() => redis.kill('SIGKILL'));
  await until('redis', () => reachable('127.0.0.1', redisPort), 10_000);
  // The overlay's MinIO is not here: blobs go to a directory every pod mounts (the apps run as uid 1000).
  const storage = mkdtempSync(path.join(os.tmpdir(), 'atelier-k8s-play-'));
  chmodSync(storage, 0o777);
  cleanups.push(() => rmSync(storage, { recursive: true, force: true }));

  // Pods share the host's network here (the Services that would connect them are not played), so
  // each Deployment gets free ports of its own: its app's and its /metrics (METRICS_PORT).
  const ports = {};
  for (const o of objects.filter((x) => x.kind === 'Deployment')) ports[o.metadata.name] = { app: await freePort(), metrics: await freePort() };
  const baseUrl = `http://127.0.0.1:${ports['atelier-gateway'].app}`;
  const adminToken = randomBytes(16).toString('hex');
  const played = [];
  for (const o of objects) {
    if (!PLAYED.has(o.kind)) continue;
    const obj = structuredClone(o);
    // One pod per namespace here: kube play has no namespaces.
    delete obj.metadata.namespace;
    if (obj.kind === 'Secret' && obj.metadata.name === 'atelier-secrets')
      obj.stringData = { DATABASE_URL: Object.assign(new URL(adminUrl), { pathname: `/${database}` }).toString(), REDIS_URL: `redis://127.0.0.1:${redisPort}` };
    if (obj.kind === 'ConfigMap' && obj.metadata.name === 'atelier-config')
      Object.assign(obj.data, { STORAGE_DRIVER: 'local', STORAGE_DIR: '/data/storage', PUBLIC_URL: baseUrl, LOG_LEVEL: 'warn', TRUST_PROXY: '' });
    const pod = obj.spec?.template?.spec;
    if (pod) {
      if (obj.kind === 'Deployment') obj.spec.replicas = 1;
      for (const c of pod.containers) {
        const app = appOf(c);
        // podman keeps locally built images under localhost/.
        c.image = `localhost/${c.image}`;
        const spec = APPS.find((a) => a.name === app);
        const port = ports[obj.metadata.name];
        if (!spec || !port) continue;
        const own = { [spec.portVar]: String(port.app), METRICS_PORT: String(port.metrics) };
        c.env = [...(c.env ?? []).filter((e) => !(e.name in own)), ...Object.entries(own).map(([name, value]) => ({ name, value }))];
        // On the host's network a container publishes no ports (podman refuses port mappings
        // there): the probes name the app's port by number instead of by the port's name.
        delete c.ports;
        for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) if (c[probe]?.httpGet) c[probe].httpGet.port = port.app;
        c.volumeMounts = [...(c.volumeMounts ?? []), { name: 'storage', mountPath: '/data/storage' }];
      }
      if (obj.kind === 'Deployment') pod.volumes = [...(pod.volumes ?? []), { name: 'storage', hostPath: { path: storage, type: 'Directory' } }];
    }
    played.push(obj);
  }
  played.push({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'atelier-operator-secrets' }, stringData: { ADMIN_TOKEN: adminToken, URL_SIGNING_SECRET: randomBytes(16).toString('hex') } });

  mkdirSync(dir, { recursive: true });
  const write = (name, objs) => {
    const file = path.join(dir, name);
    writeFileSync(file, objs.map((o) => stringify(o)).join('---\n'));
    return file;
  };
  const configs = played.filter((o) => o.kind === 'ConfigMap' || o.kind === 'Secret');
  const [job] = played.filter((o) => o.kind === 'Job');
  const deployments = played.filter((o) => o.kind === 'Deployment');

  // The Secrets become podman secrets, where kube play reads envFrom.secretRef: each a JSON map of
  // its keys to their base64 values (podman 4 does not play the Secret kind itself).
  for (const s of configs.filter((o) => o.kind === 'Secret')) {
    const data = Object.fromEntries(Object.entries({ ...s.data, ...Object.fromEntries(Object.entries(s.stringData ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')])) }));
    podman(['secret', 'rm', s.metadata.name], { allowFail: true });
    const file = path.join(dir, `${s.metadata.name}.json`);
    writeFileSync(file, JSON.stringify(data), { mode: 0o600 });
    podman(['secret', 'create', s.metadata.name, file]);
    rmSync(file);
    cleanups.push(() => podman(['secret', 'rm', s.metadata.name], { allowFail: true }));
  }
  const configFile = write('configmap.yaml', configs.filter((o) => o.kind === 'ConfigMap'));

  // The migration first, as Argo CD's PreSync hook or `kubectl wait --for=condition=complete` would.
  // kube play (podman 4) runs Pods and Deployments but not Jobs: the Job's pod template runs as a
  // Pod of the Job's name, with the template's restartPolicy (Never).
  let started = Date.now();
  const jobPod = { apiVersion: 'v1', kind: 'Pod', metadata: { ...job.spec.template.metadata, name: job.metadata.name }, spec: job.spec.template.spec };
  const jobFile = write('migrate-job.yaml', [jobPod]);
  podman(['kube', 'play', '--replace', '--network', 'host', '--configmap', configFile, jobFile]);
  cleanups.push(() => podman(['kube', 'down', jobFile], { allowFail: true }));
  const [jobContainer] = containersOf(job.metadata.name);
  expect(jobContainer, `kube play started no container for ${job.metadata.name}`);
  const waited = podman(['wait', jobContainer.Id]).stdout.trim();
  expect(waited === '0', `the migration Job exited ${waited}:\n${podman(['logs', jobContainer.Id], { allowFail: true }).stderr}`);
  step(`migration Job: exit 0 in ${((Date.now() - started) / 1000).toFixed(1)} s`);

  started = Date.now();
  const appsFile = write('played.yaml', deployments);
  podman(['kube', 'play', '--replace', '--network', 'host', '--configmap', configFile, appsFile]);
  if (!process.env.K8S_PLAY_KEEP) cleanups.push(() => podman(['kube', 'down', appsFile], { allowFail: true }));
  await Promise.all(deployments.map((d) => until(`${d.metadata.name}'s readiness probe`, async () => (await fetch(`http://127.0.0.1:${ports[d.metadata.name].app}${READINESS_PATH}`)).ok)));
  step(`${deployments.length} Deployments (${APPS.length} apps) ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);

  // What the pods run as: the manifests' security context, not only the image's defaults.
  for (const d of deployments) {
    const [c] = containersOf(`${d.metadata.name}-pod`);
    const inspect = JSON.parse(podman(['inspect', c.Id]).stdout)[0];
    const readOnly = inspect.HostConfig.ReadonlyRootfs;
    const user = inspect.Config.User;
    const tmp = inspect.Mounts.some((m) => m.Destination === '/tmp');
    const memory = inspect.HostConfig.Memory;
    expect(readOnly && String(user).startsWith('1000') && tmp && memory > 0, `${d.metadata.name}: read-only ${readOnly}, user ${user}, /tmp mounted ${tmp}, memory limit ${memory}`);
  }
  step('every pod: uid 1000, read-only root file system with /tmp mounted, a memory limit');

  const res = await fetch(`${baseUrl}/api/admin/users`, { method: 'POST', headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' }, body: JSON.stringify({ username: `play-${run}`, credits: '100' }) });
  expect(res.status === 201, `creating a user answered ${res.status}`);
  const { api_key: apiKey } = await res.json();
  await checkThroughGateway({ baseUrl, apiKey, step, cleanups });
}

let failed = false;
try {
  await main();
  step('passed');
} catch (err) {
  failed = true;
  console.error(`\nk8s:play | FAILED: ${err.message}\n`);
  for (const c of containersOf('atelier')) console.error(`--- ${c.Names?.[0]} (${c.State}, last lines)\n${podman(['logs', '--tail', '20', c.Id], { allowFail: true }).stderr}`);
} finally {
  for (const cleanup of cleanups.reverse()) await Promise.resolve(cleanup()).catch(() => undefined);
}
process.exit(failed ? 1 : 0);
