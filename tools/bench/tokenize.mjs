#!/usr/bin/env node
// npm run bench:tokenize — dataset tokenization throughput and memory, on the code the
// fine-tune service runs (compiled): a generated Parquet dataset in the local blob store, read
// by ranges window by window, every row counted with the base model's tokenizer.
//
// BENCH_ROWS (default 200000) sets the large dataset; a quarter-size run first shows whether
// peak memory grows with the dataset. Run with --expose-gc (the npm script does) so each
// run starts from a collected heap.
import { benchTempDir, buildAll, dist, machine } from './bench-env.mjs';

buildAll();
const { LocalBlobStore } = dist('libs/storage/src/index.js');
const ft = dist('libs/fine-tune/src/index.js');
const { parquetWriteBuffer } = await import('hyparquet-writer');

const ROWS = Number(process.env.BENCH_ROWS ?? 200_000);
const dir = benchTempDir('tokenize');
const blobs = new LocalBlobStore(dir);

// Deterministic text with a large vocabulary (common words, made-up names, numbers,
// punctuation), so the tokenizer's word cache cannot make the run unrealistically fast.
let seed = 42;
// mulberry32: a small, well-distributed 32-bit PRNG (fixed seed: every run reads the same data).
const rand = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const COMMON = (
  'the of and to in is you that it he was for on are as with his they at be this have from or one had by word but not what all were we when your can said there use an each which she do how their if will up other about out many then them these so some her would make like him into time has look two more write go see number no way could people my than first water been call who oil its now find long down day did get come made may part'
).split(' ');
const SYL = ['ka', 'lo', 'mi', 'ter', 'zan', 'qu', 'ix', 'bra', 'en', 'dor', 'vel', 'sha', 'ny', 'op', 'rut', 'gle'];
const word = () => {
  const r = rand();
  if (r < 0.7) return COMMON[Math.floor(rand() * COMMON.length)];
  if (r < 0.9) return Array.from({ length: 2 + Math.floor(rand() * 3) }, () => SYL[Math.floor(rand() * SYL.length)]).join('');
  return String(Math.floor(rand() * 100000));
};
const sentence = (n) => {
  const words = Array.from({ length: n }, word);
  words[0] = words[0][0].toUpperCase() + words[0].slice(1);
  return `${words.join(' ')}${rand() < 0.5 ? '.' : '?'}`;
};

async function writeDataset(name, rows, columns) {
  const columnData = columns.map((c) => ({ name: c.name, data: [], type: 'STRING' }));
  for (let i = 0; i < rows; i++) columns.forEach((c, j) => columnData[j].data.push(c.make(i)));
  // 10k-row groups and ~256 KiB pages (with an offset index): windows of a few thousand rows.
  const buf = Buffer.from(parquetWriteBuffer({ columnData, rowGroupSize: 10_000, pageSize: 256 * 1024 }));
  await blobs.put(`bench/${name}`, buf, 'application/vnd.apache.parquet');
  return buf.length;
}

const qa = [
  { name: 'question', make: () => sentence(10 + Math.floor(rand() * 30)) },
  { name: 'answer', make: () => `${sentence(20 + Math.floor(rand() * 60))} ${sentence(10 + Math.floor(rand() * 30))}` },
];
const chat = [
  {
    name: 'messages',
    make: () =>
      JSON.stringify([
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'user', content: sentence(10 + Math.floor(rand() * 30)) },
        { role: 'assistant', content: sentence(30 + Math.floor(rand() * 80)) },
      ]),
  },
];

let peakRss = 0;
let peakHeap = 0;
const sampler = setInterval(() => {
  const m = process.memoryUsage();
  peakRss = Math.max(peakRss, m.rss);
  peakHeap = Math.max(peakHeap, m.heapUsed);
}, 20);
const mb = (b) => `${(b / 1024 / 1024).toFixed(b < 10 * 1024 * 1024 ? 1 : 0)} MB`;

const registry = new ft.TokenizerRegistry();
async function run(label, file, scriptType, baseModel, params) {
  const model = ft.baseModelSpec(baseModel);
  const counter = await registry.get(model.tokenizer);
  const head = await blobs.head(`bench/${file}`);
  const dataset = await ft.openParquet(ft.blobAsyncBuffer(blobs, `bench/${file}`, head.size));
  global.gc?.();
  const base = process.memoryUsage();
  peakRss = base.rss;
  peakHeap = base.heapUsed;
  const started = performance.now();
  const stats = await ft.tokenizeDataset({
    dataset,
    scriptType,
    params: ft.validateTrainingParams(scriptType, params).params,
    model,
    counter,
    maxInvalidExamples: 100,
  });
  const seconds = (performance.now() - started) / 1000;
  console.log(
    `${`${label} [${stats.tokenizer_engine}]`.padEnd(56)} ${String(stats.rows).padStart(7)} rows ${String(stats.total_tokens).padStart(10)} tokens ` +
      `${Math.round(stats.total_tokens / seconds).toLocaleString('en-US').padStart(10)} tokens/s ${seconds.toFixed(1).padStart(5)} s  ` +
      `peak RSS +${mb(peakRss - base.rss)} (${mb(peakRss)}), heap +${mb(peakHeap - base.heapUsed)}`,
  );
  return { stats, seconds, rssDelta: peakRss - base.rss, heapDelta: peakHeap - base.heapUsed };
}

console.log(`atelier tokenization benchmark — ${machine()}, ${ROWS} rows`);
const small = Math.max(1000, Math.floor(ROWS / 4));
const sizes = {
  small: await writeDataset('qa-small.parquet', small, qa),
  large: await writeDataset('qa-large.parquet', ROWS, qa),
  chat: await writeDataset('chat.parquet', Math.floor(ROWS / 2), chat),
};
console.log(`datasets: ${small} rows ${mb(sizes.small)}, ${ROWS} rows ${mb(sizes.large)}, chat ${Math.floor(ROWS / 2)} rows ${mb(sizes.chat)}`);

const qaParams = { question_column: 'question', answer_column: 'answer' };
// The first pass loads the vocabulary and lets the native allocator and V8 reach their working
// size; the runs after it show whether memory grows with the number of rows.
await run(`warm-up: Qwen3 text_generation, ${ROWS} rows`, 'qa-large.parquet', 'text_generation', 'Qwen/Qwen3-0.6B', qaParams);
const s = await run(`Qwen3 text_generation, ${small} rows`, 'qa-small.parquet', 'text_generation', 'Qwen/Qwen3-0.6B', qaParams);
const l = await run(`Qwen3 text_generation, ${ROWS} rows`, 'qa-large.parquet', 'text_generation', 'Qwen/Qwen3-0.6B', qaParams);
await run(`Qwen3 text_chat_messages, ${Math.floor(ROWS / 2)} rows`, 'chat.parquet', 'text_chat_messages', 'Qwen/Qwen3-4B', { messages_column: 'messages' });
await run(`Llama 3 text_generation, ${ROWS} rows`, 'qa-large.parquet', 'text_generation', 'meta-llama/Llama-3.1-8B-Instruct', qaParams);
await run(`gpt-oss (o200k) text_generation, ${ROWS} rows`, 'qa-large.parquet', 'text_generation', 'openai/gpt-oss-20b', qaParams);
console.log(
  `memory vs dataset size (after warm-up): ${small} rows peak RSS +${mb(s.rssDelta)}, heap +${mb(s.heapDelta)}; ` +
    `${ROWS} rows peak RSS +${mb(l.rssDelta)}, heap +${mb(l.heapDelta)} (${ROWS / small}x the rows)`,
);
clearInterval(sampler);
