#!/usr/bin/env node
// npm run bench:gateway — authenticated requests through the real gateway over real HTTP.
// Measures the hot path every API call pays: Fastify, the access guard (API-key cache),
// routing, the error envelope, and one Postgres read for /api/credits.
import autocannon from 'autocannon';
import { benchDatabase, buildAll, dist, machine } from './bench-env.mjs';

buildAll();
const db = await benchDatabase();
const { parseConfig } = dist('libs/config/src/index.js');
const { createService } = dist('libs/runtime/src/index.js');
const { GatewayModule } = dist('apps/gateway/src/gateway.module.js');
const config = parseConfig({
  DATABASE_URL: db.databaseUrl,
  REDIS_URL: process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
  REDIS_PREFIX: db.prefix,
  ADMIN_TOKEN: 'bench-admin-token-0123456789',
  LOG_LEVEL: 'error',
  NODE_ENV: 'production',
});
const app = await createService(GatewayModule.forRoot(config), config, { service: 'gateway' });
await app.listen({ port: 0, host: '127.0.0.1' });
const base = await app.getUrl();
const user = await (
  await fetch(`${base}/api/admin/users`, {
    method: 'POST',
    headers: { authorization: `Bearer ${config.ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ username: 'bench', credits: 100 }),
  })
).json();

const duration = Number(process.env.BENCH_SECONDS ?? 8);
const cases = [
  ['GET /api/ai/models/local-image (auth, catalog)', '/api/ai/models/local-image'],
  ['GET /api/credits (auth, Postgres read)', '/api/credits'],
  ['GET /api/ai/models/nope (auth, 404 envelope)', '/api/ai/models/nope'],
];
console.log(`atelier gateway benchmark — ${machine()}, ${duration}s per case, 50 connections`);
for (const [label, path] of cases) {
  const r = await autocannon({
    url: `${base}${path}`,
    connections: 50,
    duration,
    headers: { authorization: `Bearer ${user.api_key}` },
  });
  const errors = r.non2xx - (path.endsWith('nope') ? r.non2xx : 0);
  console.log(
    `${label.padEnd(50)} ${Math.round(r.requests.average).toString().padStart(7)} req/s  p50 ${r.latency.p50} ms  p99 ${r.latency.p99} ms  errors ${r.errors + errors}`,
  );
}
await app.close();
await db.drop();
