#!/usr/bin/env node
// npm run bench:gateway — authenticated requests through the real gateway over real HTTP.
// Measures the hot path every API call pays: Fastify, the access guard (API-key cache),
// routing, the error envelope, and one Postgres read for /api/credits.
import autocannon from 'autocannon';
import { benchConfig, benchDatabase, buildAll, machine, startBenchGateway } from './bench-env.mjs';

buildAll();
const db = await benchDatabase();
const config = benchConfig(db);
const { app, base, user } = await startBenchGateway(config, 100);

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
