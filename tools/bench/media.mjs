#!/usr/bin/env node
// npm run bench:media — the media path on compiled code (as in production):
//   1. local-image latency per size, engine + blob storage (MediaRenderer, local filesystem store);
//   2. local-video encoding time per second of 720p output (ffmpeg, libx264 veryfast);
//   3. the synchronous path's overhead beyond engine time: real HTTP to the gateway, auth,
//      validation, credit reserve/settle, the hand-off to the media service over Redis, reply, storage;
//      split into the gateway's own part, the pick-up, the media service's handler beyond the engine
//      (storage, the reply sent) and the relay back, from both processes' metrics; and beside it the
//      same hop's floor, bench:floor's skeleton storing a ready-made image (floor.mjs, startSkeleton).
// BENCH_IMAGE_RUNS, BENCH_VIDEO_RUNS and BENCH_SYNC_RUNS scale it.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { root } from '../bootstrap.mjs';
import { appEnvironment } from '../malloc-arenas.mjs';
import { startSkeleton } from './floor.mjs';
import { benchConfig, benchDatabase, benchTempDir, buildAll, dieWithBench, dist, fixed, freePort, histogramTotals, machine, meanMs, percentile, require, scrapeHistograms, stageLine, startBenchGateway } from './bench-env.mjs';

buildAll();
const db = await benchDatabase();
const storageDir = benchTempDir('media');
const { ModelCatalog } = dist('libs/models/src/index.js');
const { createBlobStore } = dist('libs/storage/src/index.js');
const { EngineRegistry, MediaRenderer, engineEnvironment } = dist('libs/media/src/index.js');
const IMAGE_QUEUE = dist('libs/contracts/src/index.js').IMAGE_RENDER_QUEUE.name;
// Per-generation log lines would drown the table.
require('@nestjs/common').Logger.overrideLogger(['error']);

const config = benchConfig(db, { STORAGE_DIR: storageDir });

const ms = (n) => `${n.toFixed(1)} ms`.padStart(9);
console.log(`atelier media benchmark — ${machine()}`);

// 1. local-image per size, including storage
const catalog = ModelCatalog.fromDirectory();
const renderer = new MediaRenderer(catalog, new EngineRegistry(engineEnvironment(config)), createBlobStore(config));
const caller = { userId: 'bench', username: 'bench', namespaceId: 'bench', namespace: 'bench', requestId: 'bench' };
const imageRuns = Number(process.env.BENCH_IMAGE_RUNS ?? 30);
const sizes = [
  ['512x512 png', { image_size: 'square' }],
  ['1024x1024 png', {}],
  ['1024x1024 jpg', { output_format: 'jpg' }],
  ['1024x1024 webp', { output_format: 'webp' }],
  ['1360x765 (16:9) png', { aspect_ratio: '16:9' }],
  ['2048x2048 png', { width: 2048, height: 2048 }],
];
console.log(`\nlocal-image, engine + storage, default 28 steps, ${imageRuns} runs each (sequential)`);
for (const [label, extra] of sizes) {
  const times = [];
  for (let i = 0; i < imageRuns + 3; i++) {
    const params = { model: 'local-image', prompt: `a lighthouse on a cliff at sunset, variant ${i}`, seed: i, ...extra };
    const t = performance.now();
    await renderer.render({ caller, model: 'local-image', params }, new AbortController().signal);
    if (i >= 3) times.push(performance.now() - t); // first runs warm up sharp/libvips
  }
  console.log(`  ${label.padEnd(22)} p50 ${ms(percentile(times, 0.5))}  p95 ${ms(percentile(times, 0.95))}`);
}

// 2. local-video at 720p
const videoRuns = Number(process.env.BENCH_VIDEO_RUNS ?? 2);
const seconds = 5;
let encode = 0;
for (let i = 0; i < videoRuns; i++) {
  const t = performance.now();
  const r = await renderer.render(
    { caller, model: 'local-video', params: { model: 'local-video', prompt: 'waves rolling onto a beach at dusk', duration: seconds, resolution: '720p', aspect_ratio: '16:9', fps: 24, seed: i } },
    new AbortController().signal,
  );
  encode += (performance.now() - t) / 1000;
  if (r.usage.videoSeconds !== seconds) throw new Error(`expected ${seconds}s of video, got ${r.usage.videoSeconds}`);
}
console.log(`\nlocal-video 1280x720, 24 fps, ${seconds} s clip, ${videoRuns} runs`);
console.log(`  ${(encode / videoRuns / seconds).toFixed(3)} s of encoding per second of output (${(encode / videoRuns).toFixed(2)} s per ${seconds} s clip)`);

// 3. sync path overhead: gateway -> media service -> reply, beyond engine time
// The media service runs in its own process, as deployed; the gateway (and this client) in this one.
const mediaPort = await freePort();
const media = spawn(process.execPath, [...dieWithBench, path.join(root, 'dist/local/apps/media/src/main.js')], {
  cwd: root,
  stdio: ['ignore', 'inherit', 'inherit', 'pipe'],
  env: appEnvironment('media', {
    ...process.env,
    DATABASE_URL: config.DATABASE_URL,
    REDIS_URL: config.REDIS_URL,
    REDIS_PREFIX: config.REDIS_PREFIX,
    URL_SIGNING_SECRET: config.URL_SIGNING_SECRET,
    METRICS_TOKEN: config.METRICS_TOKEN,
    STORAGE_DIR: storageDir,
    MEDIA_PORT: String(mediaPort),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'error',
    NODE_ENV: 'production',
  }),
});
const { app: gateway, base, user } = await startBenchGateway(config, 100000);
const syncRuns = Number(process.env.BENCH_SYNC_RUNS ?? 200);
const { Metrics } = dist('libs/observability/src/index.js');
const gatewayMetrics = gateway.get(Metrics);
let stagesBefore;
let mediaBefore;
/** The same request, the i-th of a run, for the gateway and the skeleton. */
const syncBody = (i) => JSON.stringify({ model: 'local-image', prompt: 'tiny', width: 64, height: 64, num_inference_steps: 1, seed: i });
/** A server-timing entry's duration in ms (NaN when absent). */
const timed = (res, name) => Number(new RegExp(`${name};dur=([\\d.]+)`).exec(res.headers.get('server-timing') ?? '')?.[1]);
const overhead = [];
const serverOverhead = [];
const total = [];
for (let i = 0; i < syncRuns + 20; i++) {
  if (i === 20) {
    stagesBefore = histogramTotals(await gatewayMetrics.registry.metrics());
    mediaBefore = await scrapeHistograms(mediaPort);
  }
  const t = performance.now();
  const res = await fetch(`${base}/api/ai/images/generate`, {
    method: 'POST',
    headers: { authorization: `Bearer ${user.api_key}`, 'content-type': 'application/json' },
    body: syncBody(i),
  });
  await res.json();
  const elapsed = performance.now() - t;
  if (res.status !== 200) throw new Error(`sync request failed: ${res.status}`);
  const engine = timed(res, 'engine');
  const server = timed(res, 'total');
  if (i >= 20) {
    total.push(elapsed);
    overhead.push(elapsed - engine);
    serverOverhead.push(server - engine);
  }
}
// The HTTP floor of this client and gateway in the same run: an authenticated GET that does no I/O.
const floor = [];
for (let i = 0; i < syncRuns + 20; i++) {
  const t = performance.now();
  const res = await fetch(`${base}/api/ai/models/local-image`, { headers: { authorization: `Bearer ${user.api_key}` } });
  await res.json();
  if (i >= 20) floor.push(performance.now() - t);
}
// The floor of this hop in the same run: bench:floor's skeleton (node:http, the call added to a
// Redis stream, a worker that stores a ready-made PNG through the same blob store and replies, the
// answer a signed URL) with atelier's ledger, nothing else: what the topology itself costs here.
const skeleton = await startSkeleton({ port: await freePort(), prefix: `${config.REDIS_PREFIX}-floor`, storageDir: benchTempDir('media-floor'), databaseUrl: config.DATABASE_URL });
const floorServer = [];
for (let i = 0; i < syncRuns + 20; i++) {
  const res = await fetch(skeleton.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: syncBody(i) });
  await res.json();
  if (res.status !== 200) throw new Error(`skeleton request failed: ${res.status}`);
  if (i >= 20) floorServer.push(timed(res, 'total'));
}
await skeleton.stop();

console.log(`\nsync path POST /api/ai/images/generate (64x64 local-image, url response), ${syncRuns} sequential requests over HTTP`);
console.log(`  end to end                                  p50 ${ms(percentile(total, 0.5))}  p95 ${ms(percentile(total, 0.95))}`);
console.log(`  beyond engine, as the client sees it         p50 ${ms(percentile(overhead, 0.5))}  p95 ${ms(percentile(overhead, 0.95))}`);
console.log(`  beyond engine, gateway request to reply     p50 ${ms(percentile(serverOverhead, 0.5))}  p95 ${ms(percentile(serverOverhead, 0.95))}   (target p50 <= 3 ms)`);
console.log(`  the floor: skeleton, request to reply       p50 ${ms(percentile(floorServer, 0.5))}  p95 ${ms(percentile(floorServer, 0.95))}   (same hops, ledger and store, no engine; bench:floor)`);
console.log(`  beside it, an authenticated GET of a model  p50 ${ms(percentile(floor, 0.5))}  p95 ${ms(percentile(floor, 0.95))}   (this client's HTTP floor)`);
const stagesAfter = histogramTotals(await gatewayMetrics.registry.metrics());
const mediaAfter = await scrapeHistograms(mediaPort);
console.log(`  gateway stages, means in ms (media.rpc includes the engine; a reservation runs before it or, once the namespace is known to have ample credits, beside it; settle runs after the answer is sent):`);
console.log(`    ${stageLine(stagesBefore, stagesAfter, ['auth', 'media.validate', 'media.reserve', 'media.reserve_overlapped', 'media.rpc', 'media.settle'])}`);
// Means over the same requests (the authenticated GETs after them hit neither histogram).
const gatewayMean = (metric, label) => meanMs(stagesBefore, stagesAfter, metric, label);
const mediaMean = (metric, label) => meanMs(mediaBefore, mediaAfter, metric, label);
const rpcMean = gatewayMean('atelier_stage_duration_seconds', 'media.rpc');
const pickUp = mediaMean('atelier_job_wait_seconds', IMAGE_QUEUE);
const handler = mediaMean('atelier_job_duration_seconds', IMAGE_QUEUE);
const engine = mediaMean('atelier_upstream_request_duration_seconds', '');
const split = {
  gatewayOwn: gatewayMean('atelier_http_request_duration_seconds', '/api/ai/images/generate') - rpcMean,
  pickUp,
  handlerBeyondEngine: handler - engine,
  relayBack: rpcMean - pickUp - handler,
  engine,
};
const f2 = fixed(2);
console.log(`  where the time beyond the engine goes (means in ms):`);
console.log(
  `    the gateway's own (auth, validation, signing, Nest/Fastify; settle is after the answer) ${f2(split.gatewayOwn)}  |  inside the hand-off: wait until the media service picks the job up ${f2(split.pickUp)},` +
    ` handler beyond the engine (storage, the reply sent) ${f2(split.handlerBeyondEngine)}, relay back ${f2(split.relayBack)}  |  the engine ${f2(split.engine)}`,
);

if (process.env.BENCH_JSON)
  writeFileSync(
    process.env.BENCH_JSON,
    JSON.stringify(
      {
        bench: 'media',
        machine: machine(),
        sync: {
          endToEndP50: percentile(total, 0.5),
          clientBeyondEngineP50: percentile(overhead, 0.5),
          gatewayBeyondEngineP50: percentile(serverOverhead, 0.5),
          gatewayBeyondEngineP95: percentile(serverOverhead, 0.95),
          httpFloorP50: percentile(floor, 0.5),
          /** The skeleton's request to reply p50 (no engine), beside gatewayBeyondEngineP50. */
          skeletonP50: percentile(floorServer, 0.5),
          /** Means in ms, as printed under "where the time beyond the engine goes". */
          split,
        },
      },
      null,
      2,
    ),
  );
await gateway.close();
media.kill('SIGTERM');
await new Promise((resolve) => media.once('exit', resolve));
await db.drop();
