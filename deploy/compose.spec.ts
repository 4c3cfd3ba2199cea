import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import Ajv2019 from 'ajv/dist/2019';
import { parse } from 'yaml';
import { parseConfig } from '@atelier/config';

const root = path.resolve(__dirname, '..');
const file = path.join(root, 'docker-compose.yml');
/** The apps that run as services (an Nx `serve` target); the console is static files the gateway serves. */
const SERVICES = readdirSync(path.join(root, 'apps')).filter(
  (app) => 'serve' in (JSON.parse(readFileSync(path.join(root, 'apps', app, 'project.json'), 'utf8')) as { targets: Record<string, unknown> }).targets,
);
const VERSION = (JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }).version;

/* eslint-disable @typescript-eslint/no-explicit-any -- compose services are checked field by field below. */
type Service = any;

/** Compose's `${VAR:-default}`, `${VAR:?error}` and `${VAR}` interpolation against `env`. */
function interpolate(value: unknown, env: Record<string, string>): unknown {
  if (typeof value === 'string')
    return value
      .replace(/\$\$/g, '\u0000')
      .replace(/\$\{(\w+)(?:(:?[-?])([^}]*))?\}/g, (_m, name: string, op: string | undefined, arg: string | undefined) => {
        if (env[name]) return env[name];
        if (op?.endsWith('?')) throw new Error(`required variable ${name} is missing a value: ${arg}`);
        return arg ?? '';
      })
      .replace(/\u0000/g, '$');
  if (Array.isArray(value)) return value.map((v) => interpolate(v, env));
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolate(v, env)]));
  return value;
}

/** What an operator puts in .env: the two secrets compose requires. */
const SECRETS = { ADMIN_TOKEN: randomBytes(32).toString('hex'), URL_SIGNING_SECRET: randomBytes(32).toString('hex') };

describe('docker-compose.yml', () => {
  const raw = parse(readFileSync(file, 'utf8'), { merge: true });
  const compose = interpolate(raw, SECRETS) as { services: Record<string, Service> };
  const apps = SERVICES;

  it('ships no operator secret: an app given none refuses to start, naming URL_SIGNING_SECRET; a published value is refused too', () => {
    const bare = interpolate(raw, {}) as { services: Record<string, Service> };
    for (const app of SERVICES) {
      expect(bare.services[app].environment.ADMIN_TOKEN).toBe('');
      expect(() => parseConfig({ ...bare.services[app].environment, NODE_ENV: 'production' })).toThrow(/URL_SIGNING_SECRET: is required in production/);
    }
    const placeholder = interpolate(raw, { ...SECRETS, ADMIN_TOKEN: 'change-me-admin-token' }) as { services: Record<string, Service> };
    expect(() => parseConfig({ ...placeholder.services.gateway.environment, NODE_ENV: 'production' })).toThrow(/ADMIN_TOKEN: is a published default or placeholder/);
  });

  it('is valid against the Compose specification schema', () => {
    // The Compose specification's schema (see its $comment), kept in the repo so a machine without Docker validates too.
    const schema = JSON.parse(readFileSync(path.join(__dirname, 'compose-spec.schema.json'), 'utf8'));
    const ajv = new Ajv2019({ strict: false, validateFormats: false, allErrors: true });
    const valid = ajv.validate(schema, compose);
    expect(ajv.errors ?? []).toEqual([]);
    expect(valid).toBe(true);
  });

  const hasCompose = spawnSync('docker-compose', ['version'], { encoding: 'utf8' }).status === 0;
  (hasCompose ? it : it.skip)('passes `docker-compose config`', () => {
    const run = spawnSync('docker-compose', ['-f', file, 'config', '-q'], { cwd: root, encoding: 'utf8', env: { ...process.env, ...SECRETS } });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
  });

  it('runs Postgres, Redis, MinIO, the one-shots and every app (and, in the tracing profile only, a collector)', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['postgres', 'redis', 'minio', 'minio-init', 'migrate', 'otel-collector', ...apps].sort());
    const collector = compose.services['otel-collector'] as { profiles: string[]; volumes: string[] };
    expect(collector.profiles).toEqual(['tracing']);
    // The configuration it mounts is in the repository.
    expect(readFileSync(path.join(root, collector.volumes[0].split(':')[0]), 'utf8')).toContain('otlp');
    expect(compose.services.migrate.build.target).toBe('migrate');
    expect(compose.services.migrate.image).toBe(`atelier/migrate:${VERSION}`);
    expect(compose.services.migrate.command).toEqual(['node', 'tools/db/migrate.mjs', 'deploy']);
  });

  it.each(SERVICES)('wires %s with a configuration the app accepts, on shared S3 storage', async (app) => {
    const service = compose.services[app];
    // The names and tags `npm run images` builds, and the port the image declares (tools/apps.mjs).
    const port = (await import(pathToFileURL(path.join(root, 'tools/apps.mjs')).href)).APPS.find((a: { name: string }) => a.name === app).port;
    expect(service.build).toMatchObject({ context: '.', target: 'runtime', args: { APP: app, APP_PORT: String(port) } });
    expect(service.image).toBe(`atelier/${app}:${VERSION}`);
    expect(service.depends_on).toMatchObject({
      postgres: { condition: 'service_healthy' },
      redis: { condition: 'service_healthy' },
      migrate: { condition: 'service_completed_successfully' },
      'minio-init': { condition: 'service_completed_successfully' },
    });
    // The image sets NODE_ENV=production: the strictest checks apply.
    const config = parseConfig({ ...service.environment, NODE_ENV: 'production' });
    expect(config.STORAGE_DRIVER).toBe('s3');
    for (const url of [config.DATABASE_URL, config.REDIS_URL, config.S3_ENDPOINT!]) expect(Object.keys(compose.services)).toContain(new URL(url).hostname);
    expect(config.S3_ACCESS_KEY_ID).toBe(compose.services.minio.environment.MINIO_ROOT_USER);
    expect(config.S3_SECRET_ACCESS_KEY).toBe(compose.services.minio.environment.MINIO_ROOT_PASSWORD);
    expect(config.S3_BUCKET).toBe(compose.services['minio-init'].environment.S3_BUCKET);
  });
});
