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

const SENTENCE_END = new Set(['.', '!', '?']);
const PUNCTUATION = new Set(['.', ',', ';', ':', '!', '?']);

/** Words (letters, inner apostrophes and hyphens), numbers and punctuation; quotes are dropped. */
export function tokenizeWords(text: string): string[] {
  return text.match(/[A-Za-z][A-Za-z'-]*[A-Za-z]|[A-Za-z]|\d+|[.,;:!?]/g) ?? [];
}

export function isSentenceEnd(word: string): boolean {
  return SENTENCE_END.has(word);
}

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
  private readonly trigram = new Map<string, Successors>();
  private readonly bigram = new Map<string, Successors>();
  /** Lower-cased word -> its spelling in the corpus, to start from a word of the prompt. */
  private readonly vocabulary = new Map<string, string>();
  readonly sentenceStarts: Successors;

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
