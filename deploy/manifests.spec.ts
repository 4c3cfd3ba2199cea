import { randomBytes } from 'node:crypto';
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { parseConfig, type AppConfig } from '@atelier/config';
import { CHAT_COMPLETION_QUEUE, FINE_TUNE_TOKENIZE_QUEUE, IMAGE_GENERATION_QUEUE, IMAGE_RENDER_QUEUE, VIDEO_GENERATION_QUEUE, VIDEO_RENDER_QUEUE } from '@atelier/contracts';
import { RedisNames } from '@atelier/runtime';

const root = path.resolve(__dirname, '..');

/* eslint-disable @typescript-eslint/no-explicit-any -- Kubernetes objects are checked field by field below. */
type K8s = any;

function render(overlay: string): { objects: K8s[]; errors: string[] } {
  const run = spawnSync(process.execPath, [path.join(__dirname, 'manifests.mjs'), '--json', path.join(__dirname, 'overlays', overlay)], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, NODE_OPTIONS: '' },
    maxBuffer: 64 * 1024 * 1024,
  });
  if (!run.stdout) throw new Error(`rendering ${overlay} failed: ${run.stderr}`);
  return JSON.parse(run.stdout);
}

const kubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' }).status === 0;
const byKey = (objects: K8s[]) => Object.fromEntries(objects.map((o) => [`${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`, o]));

/** Which queues each workload consumes, hence which BullMQ wait lists may scale it. */
const CONSUMED: Record<string, string[]> = {
  chat: [CHAT_COMPLETION_QUEUE.name],
  media: [IMAGE_RENDER_QUEUE.name, VIDEO_RENDER_QUEUE.name],
  'queue-worker-image': [IMAGE_GENERATION_QUEUE.name],
  'queue-worker-video': [VIDEO_GENERATION_QUEUE.name],
  'fine-tune': [FINE_TUNE_TOKENIZE_QUEUE.name],
};
/** The apps that run as services (an Nx `serve` target); the console is static files the gateway serves. */
const APPS = readdirSync(path.join(root, 'apps')).filter(
  (app) => 'serve' in (JSON.parse(readFileSync(path.join(root, 'apps', app, 'project.json'), 'utf8')) as { targets: Record<string, unknown> }).targets,
);
const VERSION = (JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }).version;
let bytesOf: (quantity: string) => number;
/** What `npm run images` and its smoke test use (tools/apps.mjs). */
let launcher: { APPS: { name: string; portVar: keyof AppConfig; port: number }[]; READINESS_PATH: string; LIVENESS_PATH: string };
beforeAll(async () => {
  ({ memoryBytes: bytesOf } = (await import(pathToFileURL(path.join(__dirname, 'memory-quantity.mjs')).href)) as { memoryBytes: typeof bytesOf });
  launcher = (await import(pathToFileURL(path.join(root, 'tools/apps.mjs')).href)) as typeof launcher;
});

describe('memory quantities', () => {
  it('reads a limit in the units Kubernetes accepts, and refuses what is not a quantity', () => {
    expect(['512Mi', '1.5Gi', '1G', '1048576', '2k'].map((q) => bytesOf(q))).toEqual([512 * 2 ** 20, 1.5 * 2 ** 30, 1e9, 1048576, 2000]);
    for (const bad of ['', '512 MB', 'Mi', '-1Gi', '1Xi']) expect(() => bytesOf(bad)).toThrow(/not a memory quantity/);
  });
});

describe.each(['dev', 'production'])('Kubernetes manifests (overlay %s)', (overlay) => {
  const { objects, errors } = render(overlay);
  const of = (kind: string) => objects.filter((o) => o.kind === kind);
  const deployments = of('Deployment');
  const configMap = of('ConfigMap').find((c) => c.metadata.name === 'atelier-config');

  it('validates every object against the Kubernetes and KEDA schemas', () => {
    expect(objects.length).toBeGreaterThan(25);
    expect(errors).toEqual([]);
    const namespace = overlay === 'dev' ? 'atelier-dev' : 'atelier';
    for (const o of objects) if (o.kind !== 'Namespace') expect({ id: `${o.kind}/${o.metadata.name}`, ns: o.metadata.namespace }).toEqual({ id: `${o.kind}/${o.metadata.name}`, ns: namespace });
  });

  (kubectl ? it : it.skip)('renders exactly as kubectl kustomize does', () => {
    const out = execFileSync('kubectl', ['kustomize', path.join(__dirname, 'overlays', overlay)], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
    const theirs = parseAllDocuments(out).map((d) => d.toJS());
    expect(byKey(objects)).toEqual(byKey(theirs));
  });

  it('gives every app a Deployment with probes on its health endpoint, resources, a Service, a PDB and a scaler', () => {
    for (const app of APPS) {
      const mine = deployments.filter((d) => d.spec.template.spec.containers[0].image.split(':')[0].endsWith(app));
      expect({ app, deployments: mine.length }).toEqual({ app, deployments: app === 'queue-worker' ? 2 : 1 });
      for (const d of mine) {
        const name = d.metadata.name;
        const pod = d.spec.template.spec;
        const c = pod.containers[0];
        const port = c.ports.find((p: K8s) => p.name === 'http');
        // The probes the image smoke test waited on (npm run images:smoke), on the port the image declares.
        expect({ name, readiness: c.readinessProbe?.httpGet, liveness: c.livenessProbe?.httpGet?.path }).toEqual({
          name,
          readiness: { path: launcher.READINESS_PATH, port: 'http' },
          liveness: launcher.LIVENESS_PATH,
        });
        expect(c.startupProbe?.httpGet?.path).toBe(launcher.READINESS_PATH);
        expect({ name, port: port.containerPort }).toEqual({ name, port: launcher.APPS.find((a) => a.name === app)?.port });
        // The image `npm run images` builds: in production from the team's registry, at the same tag.
        const registry = overlay === 'production' ? 'registry.example.com/' : '';
        expect({ name, image: c.image }).toEqual({ name, image: `${registry}atelier/${app}:${VERSION}` });
        for (const kind of ['requests', 'limits']) expect({ name, kind, cpu: !!c.resources?.[kind]?.cpu, memory: !!c.resources?.[kind]?.memory }).toEqual({ name, kind, cpu: true, memory: true });
        expect(pod.securityContext.runAsNonRoot).toBe(true);
        // The app listens where the probes and the Service look: its port variable equals containerPort.
        const env = Object.fromEntries(c.env.map((e: K8s) => [e.name, e.value]));
        expect({ name, port: Number(env[launcher.APPS.find((a) => a.name === app)!.portVar]) }).toEqual({ name, port: port.containerPort });
        // Kubernetes waits longer than the app's own drain before it kills the pod.
        expect(pod.terminationGracePeriodSeconds * 1000).toBeGreaterThan(Number(env.SHUTDOWN_TIMEOUT_MS));
        if (app === 'queue-worker') expect(env.QUEUE_WORKER_POOLS).toBe(name.endsWith('-image') ? 'image,batch' : 'video');

        const labels = d.spec.selector.matchLabels;
        const selects = (o: K8s, selector: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels[k] === v) && !!o;
        expect(of('Service').filter((s) => selects(s, s.spec.selector))).toHaveLength(1);
        expect(of('PodDisruptionBudget').filter((p) => selects(p, p.spec.selector.matchLabels))).toHaveLength(1);
        const scalers = [
          ...of('HorizontalPodAutoscaler').filter((h) => h.spec.scaleTargetRef.kind === 'Deployment' && h.spec.scaleTargetRef.name === name),
          ...of('ScaledObject').filter((s) => s.spec.scaleTargetRef.name === name),
        ];
        expect({ name, scalers: scalers.length }).toEqual({ name, scalers: 1 });
      }
    }
  });

  it('scales per workload: gateway, chat and events on CPU; workers on their own BullMQ wait lists', () => {
    const names = new RedisNames(configMap.data.REDIS_PREFIX);
    for (const name of ['atelier-gateway', 'atelier-chat', 'atelier-events']) {
      const hpa = of('HorizontalPodAutoscaler').find((h) => h.spec.scaleTargetRef.name === name);
      expect(hpa.spec.metrics.map((m: K8s) => m.resource?.name)).toEqual(['cpu']);
    }
    for (const [workload, queues] of Object.entries(CONSUMED)) {
      if (workload === 'chat') continue;
      const scaled = of('ScaledObject').find((s) => s.spec.scaleTargetRef.name === `atelier-${workload}`);
      const lists = scaled.spec.triggers.filter((t: K8s) => t.type === 'redis').map((t: K8s) => t.metadata.listName);
      expect({ workload, lists }).toEqual({ workload, lists: queues.map((q) => `${names.bullPrefix(q)}:${q}:wait`) });
      for (const t of scaled.spec.triggers.filter((tr: K8s) => tr.type === 'redis')) expect(t.metadata.addressFromEnv).toBe('KEDA_REDIS_ADDRESS');
      expect(scaled.spec.minReplicaCount).toBeGreaterThanOrEqual(1);
    }
  });

  it('gives the request-path pods (gateway, chat) a young generation that Node starts with, within their memory limit', () => {
    for (const name of ['atelier-gateway', 'atelier-chat']) {
      const c = deployments.find((d) => d.metadata.name === name).spec.template.spec.containers[0];
      const nodeOptions = c.env.find((e: K8s) => e.name === 'NODE_OPTIONS')?.value ?? '';
      const semiSpaceMb = Number(/--max-semi-space-size=(\d+)/.exec(nodeOptions)?.[1] ?? 0);
      // Left to V8, a pod of 512Mi or less gets 1 MB semi-spaces, and 2Gi gets 32 MB.
      expect({ name, semiSpaceMb: semiSpaceMb >= 16 }).toEqual({ name, semiSpaceMb: true });
      // Three semi-spaces at most a quarter of the limit: V8 takes about half of it for the old generation.
      expect(3 * semiSpaceMb * 2 ** 20).toBeLessThanOrEqual(bytesOf(c.resources.limits.memory) / 4);
      // A NODE_OPTIONS Node refuses would stop the container at start. Run it, and see its young
      // generation in the heap limit (old generation + three semi-spaces) against 1 MB semi-spaces.
      const heapLimit = (options: string) => {
        const run = spawnSync(process.execPath, ['-p', 'v8.getHeapStatistics().heap_size_limit'], { env: { ...process.env, NODE_OPTIONS: options }, encoding: 'utf8' });
        expect({ name, options, stderr: run.stderr }).toEqual({ name, options, stderr: '' });
        return Number(run.stdout);
      };
      expect(heapLimit(nodeOptions) - heapLimit(`${nodeOptions} --max-semi-space-size=1`)).toBe(3 * (semiSpaceMb - 1) * 2 ** 20);
    }
  });

  it('runs the migration as a Job before the rollout', () => {
    const job = of('Job').find((j) => j.metadata.name === 'atelier-migrate');
    expect(job.metadata.annotations['argocd.argoproj.io/hook']).toBe('PreSync');
    expect(job.spec.template.spec.containers[0].command).toEqual(['node', 'tools/db/migrate.mjs', 'deploy']);
    expect(job.spec.template.spec.containers[0].image).toBe(`${overlay === 'production' ? 'registry.example.com/' : ''}atelier/migrate:${VERSION}`);
  });

  (overlay === 'dev' ? it : it.skip)('passes each workload a configuration the apps accept (ConfigMap + Secret + env)', () => {
    const secret = of('Secret').find((s) => s.metadata.name === 'atelier-secrets');
    for (const d of deployments) {
      const c = d.spec.template.spec.containers[0];
      const refs = c.envFrom.map((e: K8s) => e.configMapRef?.name ?? e.secretRef?.name);
      expect(refs).toEqual(['atelier-config', 'atelier-secrets', 'atelier-operator-secrets']);
      // No manifest ships the operator secrets: the operator makes them (deploy/README.md).
      expect(of('Secret').map((s) => s.metadata.name)).not.toContain('atelier-operator-secrets');
      expect(Object.keys(secret.stringData)).not.toEqual(expect.arrayContaining(['ADMIN_TOKEN']));
      expect(Object.keys(secret.stringData)).not.toEqual(expect.arrayContaining(['URL_SIGNING_SECRET']));
      const operatorSecrets = { ADMIN_TOKEN: randomBytes(32).toString('hex'), URL_SIGNING_SECRET: randomBytes(32).toString('hex') };
      const env = { ...configMap.data, ...secret.stringData, ...operatorSecrets, ...Object.fromEntries(c.env.map((e: K8s) => [e.name, e.value])) };
      expect(() => parseConfig(env)).not.toThrow();
      const config = parseConfig(env);
      expect(config.STORAGE_DRIVER).toBe('s3');
      const redis = new URL(config.REDIS_URL);
      expect(env.KEDA_REDIS_ADDRESS).toBe(`${redis.hostname}:${redis.port || 6379}`);
    }
  });
});

describe('Kubernetes manifests (overlay tracing: dev plus a collector)', () => {
  const { objects, errors } = render('tracing');

  it('adds a collector every app exports its traces to, and nothing else changes', () => {
    expect(errors).toEqual([]);
    const dev = render('dev').objects;
    const added = objects.filter((o) => !dev.some((d) => d.kind === o.kind && d.metadata.name === o.metadata.name));
    expect(added.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual(['ConfigMap/otel-collector-config', 'Deployment/otel-collector', 'Service/otel-collector']);
    const service = objects.find((o) => o.kind === 'Service' && o.metadata.name === 'otel-collector');
    const config = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'atelier-config');
    const endpoint = new URL(config.data.OTEL_EXPORTER_OTLP_ENDPOINT);
    expect(endpoint.hostname).toBe(service.metadata.name);
    expect(Number(endpoint.port)).toBe(service.spec.ports[0].port);
    // The apps accept it.
    expect(parseConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: config.data.OTEL_EXPORTER_OTLP_ENDPOINT }).OTEL_EXPORTER_OTLP_ENDPOINT).toBe(config.data.OTEL_EXPORTER_OTLP_ENDPOINT);
  });
});
