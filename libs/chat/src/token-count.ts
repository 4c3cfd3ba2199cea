import { countInSlices, o200k } from '@atelier/bpe';
import type { ChatMessage, ChatRole, ChatTool, ChatToolCall } from './chat-types';

// Built when this module loads, so the first request does not pay for it.
const tokenizer = o200k();
const countTokens = (piece: string) => tokenizer.count(piece);

/**
 * Token counts with OpenAI's o200k BPE (@atelier/bpe's compact copy of it; special-token text counts
 * as plain text, as OpenAI counts message content). Message framing follows OpenAI's
 * published accounting for chat models: 3 tokens per message, 1 more for a name, 3 to prime
 * the reply. Media parts are not downloaded by the gateway, so each counts a fixed amount
 * (OpenAI's base cost of a low-detail image), which keeps the reservation an upper bound
 * computable before any fetch.
 */
export const TOKENS_PER_MESSAGE = 3;
export const TOKENS_PER_NAME = 1;
export const TOKENS_REPLY_PRIMING = 3;
export const TOKENS_PER_IMAGE = 85;
export const TOKENS_PER_VIDEO = 255;
export const TOKENS_PER_AUDIO = 255;

/** Text longer than this is counted a part at a time, so a bounded count can stop between parts. */
const PART_CHARS = 4096;
/**
 * Where the text may be cut: before a space or tab between two non-space characters, or before
 * a line break that follows a letter or digit. o200k's pre-tokenizer never makes a piece that
 * takes a space or tab after a non-space character, or a line break after a letter or digit (a
 * piece starts with its whitespace; only punctuation keeps a line break after it), so the text on
 * either side splits into the same pieces apart as together: counting the parts gives exactly the
 * count of the whole (token-count.spec holds the two equal). Line breaks matter for text without
 * spaces, such as CSV. Candidates are found by their whitespace, then the character before is
 * checked: searching with the condition on it (a Unicode class tried at every character) cost 20 ms
 * per MiB of CJK.
 */
const CUT_CANDIDATE = /[ \t](?=\S)|\r?\n/g;
const LETTER_OR_DIGIT = /[\p{L}\p{N}]/u;
const NON_SPACE = /\S/;
/**
 * Where text without such whitespace (quoted CSV, minified JSON, logs) may be cut: where a run of
 * digits ends; after a letter, before anything but a letter, a mark or an apostrophe; after a
 * line break, before anything but whitespace or a slash. A letter's piece never takes what follows
 * it then (only letters, marks and "'s"-style endings), a digit's never takes a non-digit, and
 * after a line break only more whitespace or a slash joins its piece, so these are piece
 * boundaries of o200k's pre-tokenizer too. Searched only when no whitespace cut comes within
 * CUT_SEARCH_CHARS (a Unicode class tried at each character), so prose is cut as before. Inside
 * a run of more than MAX_RUN_CHARS non-space characters, which countInSlices counts in slices
 * anyway, such a cut moves where the slices fall: there the count stays within a token per slice
 * of the exact one, as for any long run. Without these cuts, 10 MiB of quoted CSV (every line
 * ending in a quote) was counted to its end: about a second of the gateway's event loop.
 */
const BOUNDARY = /(?<=\p{N})\P{N}|(?<=\p{L})[^\p{L}\p{M}']|(?<=[\r\n])[^\s/]/gu;

/**
 * How far past a part's length a cut is looked for. Text with no place to cut that soon (a long
 * run of spaces, say) is counted to its end in one part, which countInSlices can still stop
 * inside, rather than searched to its end for a cut that is not there.
 */
const CUT_SEARCH_CHARS = 16_384;

/** The first place at or after `from` where the text may be cut (before a character); its length if none comes soon. */
function nextCut(text: string, from: number): number {
  // A slice of a long string is a view, not a copy.
  const window = text.length - from > CUT_SEARCH_CHARS ? text.slice(0, from + CUT_SEARCH_CHARS) : text;
  CUT_CANDIDATE.lastIndex = from;
  for (let found = CUT_CANDIDATE.exec(window); found; found = CUT_CANDIDATE.exec(window)) {
    // Never 0: a cut is looked for at least a part's length in.
    const at = found.index;
    // The whole character before, a surrogate pair included.
    const unit = text.charCodeAt(at - 1);
    const before = unit >= 0xdc00 && unit <= 0xdfff && at >= 2 ? text.slice(at - 2, at) : text[at - 1];
    const fits = found[0][0] === ' ' || found[0][0] === '\t' ? NON_SPACE.test(before) : LETTER_OR_DIGIT.test(before);
    if (fits) return at;
  }
  BOUNDARY.lastIndex = from;
  return BOUNDARY.exec(window)?.index ?? text.length;
}

/**
 * With `stopAbove`, counting ends once the total passes it, and the total returned is only known
 * to exceed it: a 1 MiB prompt for an 8,192-token model is refused after about 8,192 tokens of
 * work instead of 250,000 (tens of milliseconds of the gateway's event loop, for every request
 * waiting on it).
 */
export function countTextTokens(text: string, stopAbove = Infinity): number {
  if (text.length <= PART_CHARS) return countInSlices(text, countTokens, stopAbove);
  let total = 0;
  for (let start = 0; start < text.length && total <= stopAbove; ) {
    const end = nextCut(text, start + PART_CHARS);
    total += countInSlices(text.slice(start, end), countTokens, stopAbove - total);
    start = end;
  }
  return total;
}

function contentTokens(content: ChatMessage['content'], stopAbove: number): number {
  if (content === undefined || content === null) return 0;
  if (typeof content === 'string') return countTextTokens(content, stopAbove);
  let total = 0;
  for (const part of content) {
    if (total > stopAbove) break;
    if (part.type === 'text') total += countTextTokens(part.text, stopAbove - total);
    else if (part.type === 'image_url') total += TOKENS_PER_IMAGE;
    else if (part.type === 'video_url') total += TOKENS_PER_VIDEO;
    else total += TOKENS_PER_AUDIO;
  }
  return total;
}

export function toolCallTokens(calls: readonly ChatToolCall[], stopAbove = Infinity): number {
  let total = 0;
  for (const call of calls) {
    if (total > stopAbove) break;
    total += TOKENS_PER_MESSAGE + countTextTokens(call.function.name);
    total += countTextTokens(call.function.arguments, stopAbove - total);
  }
  return total;
}

/** Every message names one of these; counted once here rather than in every message of every request. */
const ROLE_TOKENS = new Map<string, number>((['system', 'developer', 'user', 'assistant', 'tool'] satisfies ChatRole[]).map((role) => [role, countTextTokens(role)]));

/** `stopAbove`: as for countTextTokens, e.g. the model's context window. */
export function countPromptTokens(messages: readonly ChatMessage[], tools: readonly ChatTool[] = [], stopAbove = Infinity): number {
  let total = TOKENS_REPLY_PRIMING;
  for (const message of messages) {
    if (total > stopAbove) return total;
    total += TOKENS_PER_MESSAGE + (ROLE_TOKENS.get(message.role) ?? countTextTokens(message.role));
    total += contentTokens(message.content, stopAbove - total);
    if (message.name) total += TOKENS_PER_NAME + countTextTokens(message.name);
    if (message.tool_calls) total += toolCallTokens(message.tool_calls, stopAbove - total);
    if (message.tool_call_id) total += countTextTokens(message.tool_call_id);
  }
  // Tool definitions reach the model as text; their JSON is a close, slightly generous estimate.
  if (tools.length > 0 && total <= stopAbove) total += countTextTokens(JSON.stringify(tools), stopAbove - total);
  return total;
}
