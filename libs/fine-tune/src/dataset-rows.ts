import type { ChatFormat, ScriptType } from './base-models';
import { CHAT_ROLES, renderChat, type ChatMessage } from './chat-templates';
/**
 * One row's verdict: the texts whose token counts (plus `extraTokens` for BOS/EOS) make its
 * training sequence, or why it cannot be used.
 */
export type RowVerdict = { ok: true; texts: string[]; extraTokens: number; images: number; repoPaths?: string[] } | { ok: false; reason: string };

const utf8 = new TextDecoder('utf-8', { fatal: true });

function isError(v: unknown): v is { error: string } {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && 'error' in v;
}

/** Text from a string cell, or from bytes holding UTF-8 (binary columns without a string annotation). */
function text(value: unknown, what: string): string | { error: string } {
  if (value === null || value === undefined) return { error: `${what} is missing (null)` };
  if (typeof value === 'string') return value.trim() === '' ? { error: `${what} is empty` } : value;
  if (value instanceof Uint8Array) {
    try {
      return text(utf8.decode(value), what);
    } catch {
      return { error: `${what} is not valid UTF-8 text` };
    }
  }
  return { error: `${what} must be text, got ${Array.isArray(value) ? 'an array' : typeof value}` };
}

const IMAGE_MAGIC: [string, number[]][] = [
  ['png', [0x89, 0x50, 0x4e, 0x47]],
  ['jpeg', [0xff, 0xd8, 0xff]],
  ['gif', [0x47, 0x49, 0x46, 0x38]],
  ['bmp', [0x42, 0x4d]],
  ['tiff', [0x49, 0x49, 0x2a, 0x00]],
  ['tiff', [0x4d, 0x4d, 0x00, 0x2a]],
];

function mediaKind(bytes: Uint8Array): 'image' | 'video' | undefined {
  if (IMAGE_MAGIC.some(([, sig]) => sig.every((b, i) => bytes[i] === b))) return 'image';
  const ascii = (from: number, to: number) => String.fromCharCode(...bytes.subarray(from, to));
  if (bytes.length >= 12 && ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WEBP') return 'image';
  if (bytes.length >= 12 && ascii(4, 8) === 'ftyp') return /^(avif|avis|heic|heix|mif1)$/.test(ascii(8, 12)) ? 'image' : 'video';
  if (bytes[0] === 0x1a && bytes[1] === 0x45 && bytes[2] === 0xdf && bytes[3] === 0xa3) return 'video'; // webm/mkv
  return undefined;
}

/**
 * An image cell: an http(s) URL (not fetched here), a path of a file in the same repository
 * and branch, raw bytes, or a Hugging Face `Image` struct ({bytes, path}).
 */
function checkMedia(value: unknown, what: string, allowVideo: boolean, repoPaths: string[]): string | undefined {
  if (value === null || value === undefined) return `${what} is missing (null)`;
  if (value instanceof Uint8Array) {
    if (value.length === 0) return `${what} is empty bytes`;
    const kind = mediaKind(value);
    if (kind === 'image' || (kind === 'video' && allowVideo)) return undefined;
    return `${what} bytes are not a recognized ${allowVideo ? 'image or video' : 'image'} format`;
  }
  if (typeof value === 'string') {
    const s = value.trim();
    if (s === '') return `${what} is empty`;
    if (/^[a-z][a-z0-9+.-]*:/i.test(s)) {
      if (/^data:(image|video)\//i.test(s)) return undefined;
      try {
        const url = new URL(s);
        if (url.protocol === 'http:' || url.protocol === 'https:') return undefined;
      } catch {
        return `${what} is not a valid URL`;
      }
      return `${what} must be an http(s) URL, a repository path or image bytes`;
    }
    const segments = s.replace(/^\.\//, '').split('/');
    if (s.startsWith('/') || segments.some((p) => p === '' || p === '.' || p === '..')) return `${what} '${s}' is not a valid repository path`;
    repoPaths.push(segments.join('/'));
    return undefined;
  }
  if (typeof value === 'object' && !Array.isArray(value)) {
    const v = value as { bytes?: unknown; path?: unknown };
    if (v.bytes !== undefined && v.bytes !== null) return checkMedia(v.bytes, what, allowVideo, repoPaths);
    if (typeof v.path === 'string') return checkMedia(v.path, what, allowVideo, repoPaths);
    return `${what} has neither bytes nor path`;
  }
  return `${what} must be an image URL, path or bytes, got ${Array.isArray(value) ? 'an array' : typeof value}`;
}

const SHAREGPT_ROLES: Record<string, ChatMessage['role']> = { human: 'user', user: 'user', gpt: 'assistant', assistant: 'assistant', system: 'system', tool: 'tool' };

/** A conversation cell: a list of {role, content} (or ShareGPT {from, value}), or JSON text of one. */
function conversation(value: unknown, what: string): ChatMessage[] | { error: string } {
  let v = value;
  if (v instanceof Uint8Array) {
    const decoded = text(v, what);
    if (isError(decoded)) return decoded;
    v = decoded;
  }
  if (typeof v === 'string') {
    try {
      v = JSON.parse(v);
    } catch {
      return { error: `${what} is not a JSON list of messages` };
    }
  }
  if (v === null || v === undefined) return { error: `${what} is missing (null)` };
  if (!Array.isArray(v)) return { error: `${what} must be a list of messages, got ${typeof v}` };
  if (v.length === 0) return { error: `${what} is an empty conversation` };
  const messages: ChatMessage[] = [];
  for (let i = 0; i < v.length; i++) {
    const m = v[i] as Record<string, unknown> | null;
    if (m === null || typeof m !== 'object' || Array.isArray(m)) return { error: `${what}[${i}] is not a message object` };
    const rawRole = m.role ?? m.from;
    const role = typeof rawRole === 'string' ? (CHAT_ROLES.includes(rawRole as ChatMessage['role']) ? (rawRole as ChatMessage['role']) : SHAREGPT_ROLES[rawRole]) : undefined;
    if (!role) return { error: `${what}[${i}] has role ${JSON.stringify(rawRole ?? null)}; expected one of ${CHAT_ROLES.join(', ')}` };
    let content = m.content ?? m.value;
    if (Array.isArray(content)) {
      // OpenAI-style content parts: only text can be trained on here.
      const parts = content as { type?: unknown; text?: unknown }[];
      if (!parts.every((p) => p && p.type === 'text' && typeof p.text === 'string')) return { error: `${what}[${i}] has non-text content parts` };
      content = parts.map((p) => p.text).join('');
    }
    if (typeof content !== 'string') return { error: `${what}[${i}] content must be a string, got ${content === null ? 'null' : typeof content}` };
    const message: ChatMessage = { role, content };
    if (typeof m.reasoning_content === 'string') message.reasoning_content = m.reasoning_content;
    messages.push(message);
  }
  if (!messages.some((m) => m.role === 'assistant' && m.content.trim() !== '')) return { error: `${what} has no assistant message to learn from` };
  return messages;
}

/** Turns one dataset row into its verdict for a script type; built once per tokenization. */
export type RowCounter = (row: Record<string, unknown>) => RowVerdict;

/**
 * @param sequenceOverhead tokens a plain training sequence adds around question + answer
 *   (the tokenizer's BOS, when the model uses one, and EOS)
 */
export function rowCounter(scriptType: ScriptType, params: Record<string, unknown>, sequenceOverhead: number, chatFormat: ChatFormat | undefined): RowCounter {
  const col = (name: string) => params[name] as string;
  const cols = (name: string) => (params[name] as string[] | undefined) ?? [];
  const today = new Date().toISOString().slice(0, 10);

  // Question and answer are tokenized separately (prompt and completion), as trainers do.
  const questionAnswer = (row: Record<string, unknown>): { texts: string[] } | { error: string } => {
    const q = text(row[col('question_column')], `question (column '${col('question_column')}')`);
    if (isError(q)) return q;
    const a = text(row[col('answer_column')], `answer (column '${col('answer_column')}')`);
    if (isError(a)) return a;
    return { texts: [q, a] };
  };

  const captioned = (row: Record<string, unknown>, media: { column: string; what: string }[], allowVideo: boolean): RowVerdict => {
    const caption = text(row[col('caption_column')], `caption (column '${col('caption_column')}')`);
    if (isError(caption)) return { ok: false, reason: caption.error };
    const repoPaths: string[] = [];
    for (const m of media) {
      const problem = checkMedia(row[m.column], `${m.what} (column '${m.column}')`, allowVideo, repoPaths);
      if (problem) return { ok: false, reason: problem };
    }
    return { ok: true, texts: [caption], extraTokens: 0, images: media.length, repoPaths };
  };

  switch (scriptType) {
    case 'text_generation':
      return (row) => {
        const r = questionAnswer(row);
        return isError(r) ? { ok: false, reason: r.error } : { ok: true, texts: r.texts, extraTokens: sequenceOverhead, images: 0 };
      };
    case 'text_chat_messages':
      return (row) => {
        const messages = conversation(row[col('messages_column')], `messages (column '${col('messages_column')}')`);
        if (isError(messages)) return { ok: false, reason: messages.error };
        return { ok: true, texts: [renderChat(chatFormat ?? 'qwen3', messages, today)], extraTokens: 0, images: 0 };
      };
    case 'image_to_text':
      return (row) => {
        const r = questionAnswer(row);
        if (isError(r)) return { ok: false, reason: r.error };
        const repoPaths: string[] = [];
        for (const c of cols('image_columns')) {
          const problem = checkMedia(row[c], `image (column '${c}')`, false, repoPaths);
          if (problem) return { ok: false, reason: problem };
        }
        return { ok: true, texts: r.texts, extraTokens: sequenceOverhead, images: cols('image_columns').length, repoPaths };
      };
    case 'image_editing':
      return (row) =>
        captioned(row, [
          { column: col('image_column'), what: 'target image' },
          { column: col('control_image_column'), what: 'control image' },
        ], false);
    case 'multi_image_editing':
      return (row) =>
        captioned(row, [{ column: col('image_column'), what: 'target image' }, ...cols('control_image_columns').map((c) => ({ column: c, what: 'control image' }))], false);
    case 'image_to_video':
      return (row) => captioned(row, [{ column: col('image_column'), what: 'image' }], true);
    case 'image_generation':
      return (row) => captioned(row, [{ column: col('image_column'), what: 'image' }], false);
  }
}
