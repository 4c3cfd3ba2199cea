import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { LocalBlobStore } from '@atelier/storage';
import { baseModelSpec } from './base-models';
import { blobAsyncBuffer, openParquet, ParquetReadError, readRowWindows, type DatasetLimits } from './parquet-dataset';

const LIMITS: DatasetLimits = { maxFooterBytes: 4 << 20, maxRows: 10_000_000, maxWindowRows: 1 << 20, maxWindowBytes: 512 << 20 };
import { LengthStats, tokenizeDataset } from './tokenize-dataset';
import type { TokenCounter } from './tokenizers';
import { validateTrainingParams } from './training-params';

/** Counts words: makes expected sequence lengths obvious without a real vocabulary. */
const wordCounter: TokenCounter = {
  family: 'qwen3',
  source: 'test',
  engine: 'javascript',
  bos: '',
  eos: '<eos>',
  countBatch: async (texts) => texts.map((t) => (t === '' ? 0 : t.split(/\s+/).filter(Boolean).length)),
};

describe('LengthStats', () => {
  it('gives the nearest-rank p95, max, mean and counts above a limit, also past the histogram', () => {
    const stats = new LengthStats();
    const lengths = [...Array.from({ length: 997 }, (_, i) => (i * 37) % 5000), 70_000, 90_000, 80_000];
    for (const l of lengths) stats.add(l);
    const sorted = [...lengths].sort((a, b) => a - b);
    expect(stats.percentile(95)).toBe(sorted[Math.ceil(0.95 * sorted.length) - 1]);
    expect(stats.percentile(100)).toBe(90_000);
    expect(stats.max).toBe(90_000);
    expect(stats.countAbove(4000)).toBe(lengths.filter((l) => l > 4000).length);
    expect(new LengthStats().percentile(95)).toBe(0);
  });
});

describe('reading Parquet from the blob store', () => {
  const blobs = new LocalBlobStore(mkdtempSync(path.join(tmpdir(), 'atelier-pq-')));
  const reads: number[] = [];
  const recording = Object.assign(Object.create(blobs) as LocalBlobStore, {
    readRange: async (key: string, start: number, end: number) => {
      reads.push(end - start);
      return blobs.readRange(key, start, end);
    },
  });

  async function store(name: string, rows: number, opts: { rowGroupSize: number; pageSize?: number }) {
    const data = parquetWriteBuffer({
      columnData: [
        { name: 'question', data: Array.from({ length: rows }, (_, i) => `question number ${i} ${'pad '.repeat(i % 5)}`), type: 'STRING' },
        { name: 'answer', data: Array.from({ length: rows }, (_, i) => (i % 10 === 3 ? null : `answer ${i}`)), type: 'STRING' },
        { name: 'unused', data: Array.from({ length: rows }, () => 'x'.repeat(200)), type: 'STRING' },
      ],
      rowGroupSize: opts.rowGroupSize,
      pageSize: opts.pageSize,
    });
    const stored = await blobs.put(`t/${name}`, Buffer.from(data), 'application/vnd.apache.parquet');
    return openParquet(blobAsyncBuffer(recording, `t/${name}`, stored.size), LIMITS);
  }

  it('reads page-addressable row groups in bounded windows, in order, fetching only the needed columns', async () => {
    const dataset = await store('big.parquet', 30_000, { rowGroupSize: 12_000, pageSize: 16 * 1024 });
    reads.length = 0;
    let expected = 0;
    let largestWindow = 0;
    for await (const w of readRowWindows(dataset, ['question', 'answer'])) {
      expect(w.rowStart).toBe(expected);
      expect(w.rows[0].question).toMatch(new RegExp(`^question number ${expected} `));
      expect(w.rows[0]).not.toHaveProperty('unused');
      expected += w.rows.length;
      largestWindow = Math.max(largestWindow, w.rows.length);
    }
    expect(expected).toBe(30_000);
    expect(largestWindow).toBeLessThanOrEqual(4096);
    // Never the whole file (or a whole row group) in one read.
    expect(Math.max(...reads)).toBeLessThan(dataset.file.byteLength / 3);
  });

  it('reads files without an offset index one row group at a time', async () => {
    const dataset = await store('small-groups.parquet', 2_500, { rowGroupSize: 1_000 });
    const sizes: number[] = [];
    for await (const w of readRowWindows(dataset, ['question'])) sizes.push(w.rows.length);
    expect(sizes).toEqual([1000, 1000, 500]);
  });

  it('refuses a row group that would decode more rows or bytes at once than the limits allow, before reading it', async () => {
    const dataset = await store('groups.parquet', 2_500, { rowGroupSize: 1_000 });
    const read = async (limits: Partial<DatasetLimits>) => {
      const rows: number[] = [];
      for await (const w of readRowWindows({ ...dataset, limits: { ...LIMITS, ...limits } }, ['question'])) rows.push(w.rows.length);
      return rows;
    };
    await expect(read({ maxWindowRows: 999 })).rejects.toThrow(
      'rows 0-999 form one row group of 1000 rows without a page index, more than the 999 read at once (DATASET_MAX_WINDOW_ROWS); write the file with smaller row groups or a page index',
    );
    await expect(read({ maxWindowBytes: 1000 })).rejects.toThrow(/^rows 0-999 would decode \d+ bytes at once, more than the 1000 allowed \(DATASET_MAX_WINDOW_BYTES\)/);
    expect(await read({ maxWindowRows: 1000 })).toEqual([1000, 1000, 500]);
  });

  it('refuses a footer longer than maxFooterBytes from its length alone, and rows past maxRows', async () => {
    const dataset = await store('rows.parquet', 2_500, { rowGroupSize: 1_000 });
    const footer = new DataView(await dataset.file.slice(dataset.file.byteLength - 8, dataset.file.byteLength)).getUint32(0, true);
    reads.length = 0;
    await expect(openParquet(dataset.file, { ...LIMITS, maxFooterBytes: footer - 1 })).rejects.toThrow(`its footer (metadata) is ${footer} bytes, more than the ${footer - 1}`);
    expect(reads).toEqual([8]);
    await expect(openParquet(dataset.file, { ...LIMITS, maxRows: 2_499 })).rejects.toThrow('it has 2500 rows, more than the 2499 a dataset may have (DATASET_MAX_ROWS)');
  });

  it('refuses bytes that are not Parquet', async () => {
    const stored = await blobs.put('t/text.parquet', Buffer.from('hello, this is not a parquet file'), 'text/plain');
    await expect(openParquet(blobAsyncBuffer(blobs, 't/text.parquet', stored.size), LIMITS)).rejects.toBeInstanceOf(ParquetReadError);
  });

  it('tokenizes every row once, with BOS/EOS per plain sequence and the invalid rows listed', async () => {
    const dataset = await store('tok.parquet', 9_000, { rowGroupSize: 4_000, pageSize: 8 * 1024 });
    const params = validateTrainingParams('text_generation', { question_column: 'question', answer_column: 'answer', epochs: 2, seq_length: 6 }).params;
    const stats = await tokenizeDataset({ dataset, scriptType: 'text_generation', params, model: baseModelSpec('Qwen/Qwen3-0.6B')!, counter: wordCounter, maxInvalidExamples: 3 });
    const lengths: number[] = [];
    for (let i = 0; i < 9_000; i++) if (i % 10 !== 3) lengths.push(3 + (i % 5) + 2 + 1);
    const total = lengths.reduce((a, b) => a + b, 0);
    expect(stats).toMatchObject({
      rows: 9_000,
      valid_rows: 8_100,
      invalid_rows: 900,
      invalid_examples: [
        { row: 3, reason: "answer (column 'answer') is missing (null)" },
        { row: 13, reason: "answer (column 'answer') is missing (null)" },
        { row: 23, reason: "answer (column 'answer') is missing (null)" },
      ],
      total_tokens: total,
      tokens_x_epochs: total * 2,
      max_sequence_length: 10,
      p95_sequence_length: 10,
      rows_over_seq_length: lengths.filter((l) => l > 6).length,
    });
  });

  it('stops when its signal is aborted', async () => {
    const dataset = await store('abort.parquet', 5_000, { rowGroupSize: 1_000 });
    const params = validateTrainingParams('text_generation', { question_column: 'question', answer_column: 'answer' }).params;
    const controller = new AbortController();
    controller.abort(new Error('cancelled'));
    await expect(
      tokenizeDataset({ dataset, scriptType: 'text_generation', params, model: baseModelSpec('Qwen/Qwen3-0.6B')!, counter: wordCounter, maxInvalidExamples: 3, signal: controller.signal }),
    ).rejects.toThrow('cancelled');
  });
});
