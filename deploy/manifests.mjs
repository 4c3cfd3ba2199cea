#!/usr/bin/env node
// Renders a kustomization (the subset deploy/ uses, identical to `kubectl kustomize` for it) and
// validates every object against the Kubernetes (and KEDA) schemas of kubernetes-models.
//   node deploy/manifests.mjs deploy/overlays/dev            → the rendered YAML
//   node deploy/manifests.mjs --json deploy/overlays/dev     → {objects, errors} (used by manifests.spec.ts)
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';

const SUPPORTED = new Set(['apiVersion', 'kind', 'resources', 'namespace', 'images', 'patches', 'labels']);
const CLUSTER_SCOPED = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition', 'PersistentVolume', 'StorageClass', 'PriorityClass']);

function loadYaml(file) {
  return parseAllDocuments(readFileSync(file, 'utf8'))
    .map((d) => {
      if (d.errors.length) throw new Error(`${file}: ${d.errors[0].message}`);
      return d.toJS();
    })
    .filter((o) => o !== null && o !== undefined);
}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Strategic merge for maps and scalars (lists are replaced); deploy/ patches only maps and scalars. */
function merge(target, patch) {
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete target[key];
    else if (isObject(value) && isObject(target[key])) merge(target[key], value);
    else target[key] = structuredClone(value);
  }
  return target;
}

function podSpecs(obj) {
  const spec = obj.spec ?? {};
  return [spec.template?.spec, spec.jobTemplate?.spec?.template?.spec].filter(Boolean);
}

/** Renders the kustomization in `dir`; unknown fields are refused rather than silently ignored. */
export function render(dir) {
  const k = loadYaml(path.join(dir, 'kustomization.yaml'))[0];
  for (const key of Object.keys(k)) if (!SUPPORTED.has(key)) throw new Error(`${dir}/kustomization.yaml: field ${key} is not supported by this renderer`);
  let objects = [];
  for (const entry of k.resources ?? []) {
    const target = path.join(dir, entry);
    objects.push(...(statSync(target).isDirectory() ? render(target) : loadYaml(target)));
  }
  for (const p of k.patches ?? []) {
    if (!p.path || !p.target?.kind || !p.target?.name) throw new Error(`${dir}: patches need path and target.kind/name`);
    const patch = loadYaml(path.join(dir, p.path))[0];
    const matches = objects.filter((o) => o.kind === p.target.kind && o.metadata?.name === p.target.name);
    if (matches.length !== 1) throw new Error(`${dir}: patch ${p.path} matches ${matches.length} objects`);
    // apiVersion, kind and metadata.name only identify the target.
    const body = structuredClone(patch);
    delete body.apiVersion;
    delete body.kind;
    if (body.metadata) delete body.metadata.name;
    if (body.metadata && Object.keys(body.metadata).length === 0) delete body.metadata;
    merge(matches[0], body);
  }
  for (const l of k.labels ?? []) for (const o of objects) o.metadata = { ...o.metadata, labels: { ...o.metadata?.labels, ...l.pairs } };
  for (const image of k.images ?? [])
    for (const o of objects)
      for (const spec of podSpecs(o))
        for (const c of [...(spec.containers ?? []), ...(spec.initContainers ?? [])]) {
          const [name, tag] = c.image.split(':');
          if (name !== image.name) continue;
          c.image = `${image.newName ?? name}:${image.newTag ?? tag ?? 'latest'}`;
        }
  if (k.namespace) for (const o of objects) if (!CLUSTER_SCOPED.has(o.kind)) o.metadata = { ...o.metadata, namespace: k.namespace };
  objects = objects.map((o) => structuredClone(o));
  return objects;
}

const MODEL_MODULES = {
  v1: 'kubernetes-models/v1',
  'apps/v1': 'kubernetes-models/apps/v1',
  'batch/v1': 'kubernetes-models/batch/v1',
  'policy/v1': 'kubernetes-models/policy/v1',
  'autoscaling/v2': 'kubernetes-models/autoscaling/v2',
  'keda.sh/v1alpha1': '@kubernetes-models/keda/keda.sh/v1alpha1',
};

/** Schema problems per object: unknown kinds, missing or mistyped fields. */
export async function validate(objects) {
  const errors = [];
  for (const o of objects) {
    const id = `${o.apiVersion} ${o.kind} ${o.metadata?.name}`;
    const module = MODEL_MODULES[o.apiVersion];
    const Model = module && (await import(module))[o.kind];
    if (!Model) {
      errors.push(`${id}: no schema known for this apiVersion/kind`);
      continue;
    }
    try {
      new Model(o).validate();
    } catch (err) {
      errors.push(`${id}: ${err.message}`);
    }
  }
  return errors;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  const json = args[0] === '--json';
  const dir = json ? args[1] : args[0];
  if (!dir) {
    process.stderr.write('usage: node deploy/manifests.mjs [--json] <kustomization dir>\n');
    process.exit(2);
  }
  const objects = render(dir);
  const errors = await validate(objects);
  if (json) process.stdout.write(JSON.stringify({ objects, errors }));
  else {
    process.stdout.write(objects.map((o) => stringify(o)).join('---\n'));
    for (const e of errors) process.stderr.write(`invalid: ${e}\n`);
  }
  process.exit(errors.length ? 1 : 0);
}
