/**
 * Word trigram counts with bigram and unigram backoff: the model the built-in local-chat engine
 * samples from, as data a trainer can learn from a dataset, store in a checkpoint, and the chat
 * service can load on top of the base corpus (an adapter of counts, as a LoRA is one of weights).
 */

const SENTENCE_END = new Set(['.', '!', '?']);
const PUNCTUATION = new Set(['.', ',', ';', ':', '!', '?']);

/** Words (letters, inner apostrophes and hyphens), numbers and punctuation; quotes are dropped. */
export function tokenizeWords(text: string): string[] {
  return text.match(/[A-Za-z][A-Za-z'-]*[A-Za-z]|[A-Za-z]|\d+|[.,;:!?]/g) ?? [];
}

export function isSentenceEnd(word: string): boolean {
  return SENTENCE_END.has(word);
}

export function isPunctuation(word: string): boolean {
  return PUNCTUATION.has(word);
}

/** A checkpoint's adapter file: counts by context (`a b` for trigrams, `a` for bigrams), then word. */
export interface NgramCountsJson {
  format: 'atelier-word-ngrams-v1';
  /** How many words the counts were learned from. */
  words: number;
  trigram: Record<string, Record<string, number>>;
  bigram: Record<string, Record<string, number>>;
  unigram: Record<string, number>;
  starts: Record<string, number>;
}

export const NGRAM_FORMAT = 'atelier-word-ngrams-v1';

type Table = Map<string, Map<string, number>>;

const UNSEEN_WORDS = 10_000;

function bump(table: Table, context: string, word: string, by = 1): void {
  let row = table.get(context);
  if (!row) table.set(context, (row = new Map()));
  row.set(word, (row.get(word) ?? 0) + by);
}

function toRecord(table: Table): Record<string, Record<string, number>> {
  const out: Record<string, Record<string, number>> = {};
  for (const [ctx, row] of table) out[ctx] = Object.fromEntries(row);
  return out;
}

/** Counts learned so far; `learn` adds text, `nll` scores held-out text against them. */
export class NgramCounts {
  readonly trigram: Table = new Map();
  readonly bigram: Table = new Map();
  readonly unigram = new Map<string, number>();
  readonly starts = new Map<string, number>();
  words = 0;

  learn(text: string): void {
    const words = tokenizeWords(text);
    for (let i = 0; i < words.length; i++) {
      const w = words[i];
      this.words++;
      this.unigram.set(w, (this.unigram.get(w) ?? 0) + 1);
      if ((i === 0 || isSentenceEnd(words[i - 1])) && !PUNCTUATION.has(w)) this.starts.set(w, (this.starts.get(w) ?? 0) + 1);
      if (i >= 1) bump(this.bigram, words[i - 1], w);
      if (i >= 2) bump(this.trigram, `${words[i - 2]} ${words[i - 1]}`, w);
    }
  }

  /**
   * Mean negative log-likelihood per word of `text` (nats) under the counts: an interpolation of
   * trigram, bigram and add-one unigram estimates, so unseen words cost a finite, large amount.
   * It falls as the counts cover more of the text's distribution: the trainer's loss.
   */
  nll(text: string): number {
    const words = tokenizeWords(text);
    if (words.length === 0) return 0;
    // Add-one over the words seen and a nominal 10,000 unseen ones: a word never seen costs ~9 nats.
    const vocabulary = this.unigram.size + UNSEEN_WORDS;
    let total = 0;
    for (let i = 0; i < words.length; i++) {
      const w = words[i];
      const uni = ((this.unigram.get(w) ?? 0) + 1) / (this.words + vocabulary);
      const biRow = i >= 1 ? this.bigram.get(words[i - 1]) : undefined;
      const bi = biRow ? (biRow.get(w) ?? 0) / sum(biRow) : 0;
      const triRow = i >= 2 ? this.trigram.get(`${words[i - 2]} ${words[i - 1]}`) : undefined;
      const tri = triRow ? (triRow.get(w) ?? 0) / sum(triRow) : 0;
      const p = 0.6 * tri + 0.3 * bi + 0.1 * uni + (triRow ? 0 : 0.6 * bi) + (biRow ? 0 : 0.3 * uni);
      total -= Math.log(Math.max(p, 1e-12));
    }
    return total / words.length;
  }

  toJSON(): NgramCountsJson {
    return {
      format: NGRAM_FORMAT,
      words: this.words,
      trigram: toRecord(this.trigram),
      bigram: toRecord(this.bigram),
      unigram: Object.fromEntries(this.unigram),
      starts: Object.fromEntries(this.starts),
    };
  }

  /** Counts from an adapter file, to learn on from where a checkpoint left off. */
  static fromJSON(json: NgramCountsJson): NgramCounts {
    const counts = new NgramCounts();
    counts.words = json.words;
    for (const [table, record] of [[counts.trigram, json.trigram], [counts.bigram, json.bigram]] as const)
      for (const [ctx, row] of Object.entries(record)) table.set(ctx, new Map(Object.entries(row)));
    for (const [w, c] of Object.entries(json.unigram)) counts.unigram.set(w, c);
    for (const [w, c] of Object.entries(json.starts)) counts.starts.set(w, c);
    return counts;
  }
}

function sum(row: Map<string, number>): number {
  let n = 0;
  for (const c of row.values()) n += c;
  return n;
}

/** Parses an adapter file; throws on anything else. */
export function parseNgramCounts(text: string): NgramCountsJson {
  const parsed = JSON.parse(text) as Partial<NgramCountsJson>;
  if (parsed?.format !== NGRAM_FORMAT || typeof parsed.trigram !== 'object' || typeof parsed.bigram !== 'object' || typeof parsed.unigram !== 'object' || typeof parsed.starts !== 'object')
    throw new Error(`not an ${NGRAM_FORMAT} file`);
  return parsed as NgramCountsJson;
}
