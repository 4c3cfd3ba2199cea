import { isSentenceEnd, tokenizeWords, type NgramCountsJson } from '@atelier/ngram';
import { CORPUS } from './corpus';
import type { Rng } from './rng';

/** Successors of a context with how often each followed it in the corpus. */
interface Successors {
  words: string[];
  counts: number[];
}

export interface SamplingOptions {
  temperature: number;
  topP: number;
  frequencyPenalty: number;
  presencePenalty: number;
}

const PUNCTUATION = new Set(['.', ',', ';', ':', '!', '?']);

// The same words the trainer learns (libs/ngram), so an adapter's contexts match the model's.
export { isSentenceEnd, tokenizeWords };

/** Joins generated words back into text: no space before punctuation. */
export function joinWords(words: readonly string[]): string {
  let out = '';
  for (const w of words) out += out === '' || PUNCTUATION.has(w) ? w : ` ${w}`;
  return out;
}

/** The text a word adds after `previous` (for incremental streaming and token counting). */
export function wordPiece(word: string, isFirst: boolean): string {
  return isFirst || PUNCTUATION.has(word) ? word : ` ${word}`;
}

/**
 * A word-level trigram model with backoff to bigrams, trained on the bundled corpus the first
 * time it is used (a few milliseconds). Counts, not probabilities, are stored so temperature,
 * top_p and the penalties can reshape the distribution per request.
 */
export class MarkovModel {
  protected readonly trigram = new Map<string, Successors>();
  protected readonly bigram = new Map<string, Successors>();
  /** Lower-cased word -> its spelling in the corpus, to start from a word of the prompt. */
  protected readonly vocabulary = new Map<string, string>();
  sentenceStarts: Successors;

  constructor(corpus: string) {
    const words = tokenizeWords(corpus);
    const starts = new Map<string, number>();
    for (let i = 0; i < words.length; i++) {
      const w = words[i];
      if (!PUNCTUATION.has(w) && !this.vocabulary.has(w.toLowerCase())) this.vocabulary.set(w.toLowerCase(), w);
      if (i === 0 || isSentenceEnd(words[i - 1])) if (!PUNCTUATION.has(w)) starts.set(w, (starts.get(w) ?? 0) + 1);
      if (i + 1 < words.length) add(this.bigram, w, words[i + 1]);
      if (i + 2 < words.length) add(this.trigram, `${w} ${words[i + 1]}`, words[i + 2]);
    }
    this.sentenceStarts = { words: [...starts.keys()], counts: [...starts.values()] };
  }

  get vocabularySize(): number {
    return this.vocabulary.size;
  }

  /** The corpus spelling of a word of the prompt the model can continue from, if any. */
  known(word: string): string | undefined {
    const spelled = this.vocabulary.get(word.toLowerCase());
    return spelled !== undefined && this.bigram.has(spelled) ? spelled : undefined;
  }

  /** Samples the word after `previous` (the last one or two words), backing off to bigrams, then to sentence starts. */
  next(previous: readonly string[], rng: Rng, options: SamplingOptions, occurrences: ReadonlyMap<string, number>): string {
    const n = previous.length;
    const successors =
      (n >= 2 ? this.trigram.get(`${previous[n - 2]} ${previous[n - 1]}`) : undefined) ??
      (n >= 1 ? this.bigram.get(previous[n - 1]) : undefined) ??
      this.sentenceStarts;
    return sample(successors, rng, options, occurrences);
  }
}

/**
 * A fine-tuned local-chat: the counts a checkpoint learned (libs/ngram, the built-in trainer's
 * adapter file) tried first, the base corpus's where they know nothing, as a LoRA adds to the
 * weights it was trained against.
 */
export class AdaptedMarkovModel extends MarkovModel {
  constructor(
    counts: NgramCountsJson,
    private readonly base: MarkovModel,
  ) {
    super('');
    const fill = (table: Map<string, Successors>, record: Record<string, Record<string, number>>) => {
      for (const [ctx, row] of Object.entries(record)) table.set(ctx, { words: Object.keys(row), counts: Object.values(row) });
    };
    fill(this.trigram, counts.trigram);
    fill(this.bigram, counts.bigram);
    for (const w of Object.keys(counts.unigram)) if (!PUNCTUATION.has(w) && !this.vocabulary.has(w.toLowerCase())) this.vocabulary.set(w.toLowerCase(), w);
    this.sentenceStarts = Object.keys(counts.starts).length > 0 ? { words: Object.keys(counts.starts), counts: Object.values(counts.starts) } : base.sentenceStarts;
  }

  override get vocabularySize(): number {
    return this.vocabulary.size + this.base.vocabularySize;
  }

  override known(word: string): string | undefined {
    return super.known(word) ?? this.base.known(word);
  }

  override next(previous: readonly string[], rng: Rng, options: SamplingOptions, occurrences: ReadonlyMap<string, number>): string {
    const n = previous.length;
    const own = (n >= 2 ? this.trigram.get(`${previous[n - 2]} ${previous[n - 1]}`) : undefined) ?? (n >= 1 ? this.bigram.get(previous[n - 1]) : undefined);
    if (own) return sample(own, rng, options, occurrences);
    // Where the adapter knows nothing (a word of the base corpus), the base model goes on; a sentence starts from the adapter's.
    if (n >= 1 && !isSentenceEnd(previous[n - 1]) && this.base.known(previous[n - 1]) !== undefined) return this.base.next(previous, rng, options, occurrences);
    return sample(this.sentenceStarts, rng, options, occurrences);
  }
}

function add(table: Map<string, Successors>, context: string, word: string): void {
  let s = table.get(context);
  if (!s) {
    s = { words: [], counts: [] };
    table.set(context, s);
  }
  const i = s.words.indexOf(word);
  if (i >= 0) s.counts[i] += 1;
  else {
    s.words.push(word);
    s.counts.push(1);
  }
}

/**
 * OpenAI's semantics on count-based logits: penalties subtract from the logit of words already
 * generated (frequency per occurrence, presence once), temperature divides the logits
 * (0 = always the most likely word), top_p keeps the smallest set of words whose probability
 * reaches p.
 */
export function sample(s: Successors, rng: Rng, o: SamplingOptions, occurrences: ReadonlyMap<string, number>): string {
  const logits = s.words.map((w, i) => {
    const seen = occurrences.get(w) ?? 0;
    return Math.log(s.counts[i]) - o.frequencyPenalty * seen - (seen > 0 ? o.presencePenalty : 0);
  });
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  if (o.temperature === 0 || o.topP === 0 || logits.length === 1) return s.words[best];

  const max = logits[best];
  const weights = logits.map((l) => Math.exp((l - max) / o.temperature));
  const total = weights.reduce((a, b) => a + b, 0);
  const order = weights.map((_, i) => i).sort((a, b) => weights[b] - weights[a] || a - b);
  const kept: number[] = [];
  let mass = 0;
  for (const i of order) {
    kept.push(i);
    mass += weights[i] / total;
    if (mass >= o.topP) break;
  }
  const keptTotal = kept.reduce((a, i) => a + weights[i], 0);
  let r = rng() * keptTotal;
  for (const i of kept) {
    r -= weights[i];
    if (r <= 0) return s.words[i];
  }
  return s.words[kept[kept.length - 1]];
}

let shared: MarkovModel | undefined;

/** The model trained on the bundled corpus, built on first use and shared by every request. */
export function localChatModel(): MarkovModel {
  shared ??= new MarkovModel(CORPUS);
  return shared;
}
