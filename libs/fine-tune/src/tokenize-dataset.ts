import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { Prisma } from '@atelier/db';
import type { BaseModelSpec, ScriptType } from './base-models';
import { rowCounter } from './dataset-rows';
import { readRowWindows, type ParquetDataset } from './parquet-dataset';
import type { TokenCounter } from './tokenizers';
import { referencedColumns } from './training-params';

/** What a tokenization found; stored on the fine-tune and shown by GET. */
export interface TokenizationStats {
  tokenizer: string;
  /** `native` (Hugging Face tokenizers binding) or `javascript`. */
  tokenizer_engine: string;
  /** true when the counts come from the closest published tokenizer, not the model's own. */
  approximate: boolean;
  rows: number;
  valid_rows: number;
  invalid_rows: number;
  /** The first invalid rows, by zero-based row index (as pandas / datasets number them). */
  invalid_examples: { row: number; reason: string }[];
  total_tokens: number;
  /** Text script types; null for image/video types, which train for `steps`. */
  epochs: number | null;
  tokens_x_epochs: number | null;
  max_sequence_length: number;
  mean_sequence_length: number;
  p95_sequence_length: number;
  seq_length: number | null;
  rows_over_seq_length: number | null;
  /** Image cells checked (URLs are checked for form only; repository paths for existence). */
  images_checked: number;
  estimated_cost: string;
  cost_basis: string;
  duration_ms: number;
  tokens_per_second: number;
}

/** Sequence lengths in bounded memory: exact counts up to 64k tokens, the rare longer ones kept as values. */
export class LengthStats {
  private readonly histogram = new Uint32Array(65_536);
  private readonly overflow: number[] = [];
  count = 0;
  sum = 0;
  max = 0;

  add(length: number): void {
    this.count++;
    this.sum += length;
    if (length > this.max) this.max = length;
    if (length < this.histogram.length) this.histogram[length]++;
    else this.overflow.push(length);
  }

  /** Nearest-rank percentile: the smallest length L with at least p% of rows <= L. */
  percentile(p: number): number {
    if (this.count === 0) return 0;
    const rank = Math.ceil((p / 100) * this.count);
    let seen = 0;
    for (let len = 0; len < this.histogram.length; len++) {
      seen += this.histogram[len];
      if (seen >= rank) return len;
    }
    const rest = [...this.overflow].sort((a, b) => a - b);
    return rest[rank - seen - 1] ?? this.max;
  }

  countAbove(limit: number): number {
    let n = 0;
    for (let len = limit + 1; len < this.histogram.length; len++) n += this.histogram[len];
    return n + this.overflow.filter((l) => l > limit).length;
  }
}

export interface TokenizeOptions {
  dataset: ParquetDataset;
  scriptType: ScriptType;
  params: Record<string, unknown>;
  model: BaseModelSpec;
  counter: TokenCounter;
  maxInvalidExamples: number;
  signal?: AbortSignal;
  /** Which of these repository paths exist on the dataset's branch (image cells that are paths). */
  existingPaths?: (paths: string[]) => Promise<Set<string>>;
}

/** Rows handled between two yields to the event loop (BullMQ lock renewal, cancellation). */
const YIELD_EVERY_ROWS = 2048;

/**
 * Streams a Parquet dataset window by window and counts every row's training sequence with
 * the base model's tokenizer. Memory stays flat in dataset size: one window of rows (plus the
 * next one being decoded while the current one is counted) and a fixed-size length histogram.
 */
export async function tokenizeDataset(opts: TokenizeOptions): Promise<TokenizationStats> {
  const started = Date.now();
  const { dataset, scriptType, params, counter } = opts;
  const columns = [...new Set(referencedColumns(scriptType, params).map((c) => c.column))];
  const specials = [counter.bos, counter.eos].filter((t) => t !== '');
  const overhead = (await counter.countBatch(specials)).reduce((a, b) => a + b, 0);
  const countRow = rowCounter(scriptType, params, overhead, opts.model.chat_format);
  const lengths = new LengthStats();
  const invalid: { row: number; reason: string }[] = [];
  let invalidRows = 0;
  let images = 0;
  let rows = 0;

  const reject = (row: number, reason: string) => {
    invalidRows++;
    if (invalid.length < opts.maxInvalidExamples) invalid.push({ row, reason });
  };

  const windows = readRowWindows(dataset, columns)[Symbol.asyncIterator]();
  let next = windows.next();
  try {
    for (;;) {
      const current = await next;
      if (current.done) break;
      const window = current.value;
      // Decode the next window while this one is being tokenized.
      next = windows.next();
      next.catch(() => undefined);

      const accepted: { row: number; texts: number; extra: number; images: number; paths?: string[] }[] = [];
      const texts: string[] = [];
      for (let i = 0; i < window.rows.length; i++) {
        const row = window.rowStart + i;
        const verdict = countRow(window.rows[i]);
        rows++;
        if (!verdict.ok) reject(row, verdict.reason);
        else {
          accepted.push({ row, texts: verdict.texts.length, extra: verdict.extraTokens, images: verdict.images, paths: verdict.repoPaths });
          for (const t of verdict.texts) texts.push(t);
        }
        if (i % YIELD_EVERY_ROWS === YIELD_EVERY_ROWS - 1) {
          await yieldToEventLoop();
          opts.signal?.throwIfAborted();
        }
      }
      const counts = await counter.countBatch(texts);

      // Rows whose images are repository paths count only if those files exist on the branch.
      const wanted = [...new Set(accepted.flatMap((a) => a.paths ?? []))];
      const existing = wanted.length && opts.existingPaths ? await opts.existingPaths(wanted) : new Set<string>();
      let t = 0;
      for (const a of accepted) {
        let tokens = a.extra;
        for (let k = 0; k < a.texts; k++) tokens += counts[t++];
        const missing = a.paths?.find((path) => !existing.has(path));
        if (missing) reject(a.row, `image file '${missing}' does not exist in the repository on this branch`);
        else {
          lengths.add(tokens);
          images += a.images;
        }
      }
      await yieldToEventLoop();
      opts.signal?.throwIfAborted();
    }
  } finally {
    await windows.return?.(undefined).catch(() => undefined);
  }

  invalid.sort((a, b) => a.row - b.row);
  const textType = ['text_generation', 'text_chat_messages', 'image_to_text'].includes(scriptType);
  const epochs = textType ? (params.epochs as number) : null;
  const seqLength = textType ? (params.seq_length as number) : null;
  const tokensXEpochs = epochs === null ? null : lengths.sum * epochs;
  const cost = estimateCost(opts.model, lengths.count, tokensXEpochs, params);
  const durationMs = Date.now() - started;
  return {
    tokenizer: counter.source,
    tokenizer_engine: counter.engine,
    approximate: opts.model.approximate,
    rows,
    valid_rows: lengths.count,
    invalid_rows: invalidRows,
    invalid_examples: invalid,
    total_tokens: lengths.sum,
    epochs,
    tokens_x_epochs: tokensXEpochs,
    max_sequence_length: lengths.max,
    mean_sequence_length: lengths.count ? Math.round((lengths.sum / lengths.count) * 100) / 100 : 0,
    p95_sequence_length: lengths.percentile(95),
    seq_length: seqLength,
    rows_over_seq_length: seqLength === null ? null : lengths.countAbove(seqLength),
    images_checked: images,
    estimated_cost: cost.amount,
    cost_basis: cost.basis,
    duration_ms: durationMs,
    tokens_per_second: Math.round(lengths.sum / Math.max(durationMs / 1000, 0.001)),
  };
}

/** Credits a training run is expected to cost: per million tokens x epochs, or per step. */
export function estimateCost(model: BaseModelSpec, validRows: number, tokensXEpochs: number | null, params: Record<string, unknown>): { amount: string; basis: string } {
  if ('per_million_tokens' in model.price) {
    const price = new Prisma.Decimal(model.price.per_million_tokens);
    const tokens = tokensXEpochs ?? 0;
    return {
      amount: price.mul(tokens).div(1_000_000).toDecimalPlaces(6, Prisma.Decimal.ROUND_UP).toFixed(6),
      basis: `${tokens} tokens x epochs at ${price.toFixed()} credits per million tokens`,
    };
  }
  const price = new Prisma.Decimal(model.price.per_step);
  const steps = validRows > 0 ? (params.steps as number) : 0;
  return { amount: price.mul(steps).toDecimalPlaces(6, Prisma.Decimal.ROUND_UP).toFixed(6), basis: `${steps} steps at ${price.toFixed()} credits per step` };
}
