import { o200k } from '@atelier/bpe';
import { ApiError } from '@atelier/contracts';
import type { JsonSchemaObject } from '@atelier/models';
import type { ChatMessage, ChatRequest, ChatTool, ChatToolCall, FinishReason } from '../chat-types';
import { countTextTokens, toolCallTokens } from '../token-count';
import { isSentenceEnd, joinWords, localChatModel, tokenizeWords, wordPiece, type MarkovModel, type SamplingOptions } from './markov-model';
import { requestRng, type Rng } from './rng';
import { sampleSchemaValue, SchemaSamplingError, type SamplerContext } from './schema-sampler';
import { schemaRefusal, UserSchemaError } from '../user-schema';

/** What the gateway's fetcher learned about a media part (the model "sees" only this). */
export interface MediaDescription {
  kind: 'image' | 'video';
  contentType: string;
  bytes: number;
  /** Pixel size when the bytes could be decoded. */
  width?: number;
  height?: number;
}

export interface LocalChatOutput {
  /** The text, split into the pieces a stream sends (joined, they are `content`). */
  pieces: string[];
  content: string | null;
  toolCalls: ChatToolCall[];
  finishReason: FinishReason;
  completionTokens: number;
}

const STOPWORDS = new Set(
  'the and for are but not you your with have has had this that from what when where which who why how was were will would could should about into than then them they their there these those some any can does did its just over also very much more most such only own same too other each both few all our out off who whom here been being'.split(
    ' ',
  ),
);

function textOf(message: ChatMessage | undefined): string {
  if (!message || message.content === null || message.content === undefined) return '';
  if (typeof message.content === 'string') return message.content;
  return message.content
    .map((p) => (p.type === 'text' ? p.text : ''))
    .filter(Boolean)
    .join(' ');
}

/** Words of the caller's last message that a reply or a tool argument should pick up: names first. */
function hintsFrom(text: string): string[] {
  const words = tokenizeWords(text);
  const proper: string[] = [];
  const other: string[] = [];
  words.forEach((w, i) => {
    if (w.length < 2 || /^[.,;:!?]$/.test(w)) return;
    const startsSentence = i === 0 || isSentenceEnd(words[i - 1]);
    if (/^[A-Z]/.test(w) && !startsSentence) proper.push(w);
    else if (w.length >= 4 && !STOPWORDS.has(w.toLowerCase())) other.push(w);
  });
  return [...new Set([...proper, ...other])];
}

function describeMedia(media: readonly MediaDescription[]): string {
  if (media.length === 0) return '';
  const items = media.map((m) => {
    const size = m.bytes >= 1024 * 1024 ? `${(m.bytes / 1024 / 1024).toFixed(1)} MB` : `${(m.bytes / 1024).toFixed(1)} KB`;
    const dims = m.width && m.height ? `, ${m.width}x${m.height}` : '';
    return `${m.kind === 'image' ? 'an image' : 'a video'} (${m.contentType}${dims}, ${size})`;
  });
  const list = items.length === 1 ? items[0] : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`;
  return `I received ${list}. `;
}

/**
 * Sentences from the Markov model, started from a word of the prompt when the model knows one.
 * Stops after a few sentences or once the token budget is clearly exceeded (the exact cut is
 * made on the final text).
 */
function generateText(prompt: string, request: ChatRequest, rng: Rng, tokenBudget: number, sentences: number, model: MarkovModel = localChatModel()): string {
  const options: SamplingOptions = {
    temperature: request.temperature,
    topP: request.topP,
    frequencyPenalty: request.frequencyPenalty,
    presencePenalty: request.presencePenalty,
  };
  const known = tokenizeWords(prompt)
    .map((w) => model.known(w))
    .filter((w): w is string => w !== undefined && w.length > 3);
  // `raw` keeps the corpus spelling (the model's context keys); `shown` is capitalised for output.
  const raw: string[] = [];
  const shown: string[] = [];
  const push = (word: string) => {
    const startsSentence = raw.length === 0 || isSentenceEnd(raw[raw.length - 1]);
    raw.push(word);
    shown.push(startsSentence ? word[0].toUpperCase() + word.slice(1) : word);
  };
  if (known.length > 0) push(request.temperature === 0 ? known[0] : known[Math.floor(rng() * known.length)]);
  const occurrences = new Map<string, number>();
  let tokens = 0;
  let ended = 0;
  // A generous cap in words keeps a degenerate chain (temperature 0 loops) bounded.
  for (let guard = 0; guard < tokenBudget * 2 + 64; guard++) {
    const next = model.next(raw.slice(-2), rng, options, occurrences);
    push(next);
    occurrences.set(next, (occurrences.get(next) ?? 0) + 1);
    tokens += countTextTokens(wordPiece(shown[shown.length - 1], shown.length === 1));
    if (isSentenceEnd(next) && ++ended >= sentences) break;
    if (tokens > tokenBudget + 8) break;
  }
  return joinWords(shown);
}

/** Applies stop sequences (cut before the earliest) and the token limit to the final text. */
function limit(text: string, request: ChatRequest): { text: string; finish: FinishReason } {
  let out = text;
  let finish: FinishReason = 'stop';
  let cut = -1;
  for (const stop of request.stop) {
    const at = out.indexOf(stop);
    if (at >= 0 && (cut < 0 || at < cut)) cut = at;
  }
  if (cut >= 0) out = out.slice(0, cut);
  const tokenizer = o200k();
  const tokens = tokenizer.encode(out);
  if (tokens.length > request.maxTokens) {
    out = tokenizer.decode(tokens.slice(0, request.maxTokens));
    finish = 'length';
  }
  return { text: out, finish };
}

function splitPieces(text: string): string[] {
  return text.match(/\s*\S+|\s+$/g) ?? (text ? [text] : []);
}

function toolWords(tool: ChatTool): Set<string> {
  const raw = `${tool.function.name.replace(/([a-z])([A-Z])/g, '$1 $2').replace(/[_-]/g, ' ')} ${tool.function.description ?? ''}`;
  return new Set(tokenizeWords(raw.toLowerCase()).filter((w) => w.length >= 3 && !STOPWORDS.has(w)));
}

/** Tools whose name or description shares words with the prompt, best match first. */
function matchingTools(tools: readonly ChatTool[], prompt: string): ChatTool[] {
  const promptWords = new Set(tokenizeWords(prompt.toLowerCase()));
  return tools
    .map((tool, index) => ({ tool, index, score: [...toolWords(tool)].filter((w) => promptWords.has(w) || promptWords.has(`${w}s`)).length }))
    .filter((t) => t.score > 0)
    .sort((a, b) => b.score - a.score || a.index - b.index)
    .map((t) => t.tool);
}

/** Which tools to call: a named one, the matching ones (or the first) when required, matching ones on auto. */
function toolsToCall(request: ChatRequest, prompt: string, lastRole: string | undefined): ChatTool[] {
  const { tools, toolChoice } = request;
  if (tools.length === 0 || toolChoice === 'none') return [];
  if (typeof toolChoice === 'object') return tools.filter((t) => t.function.name === toolChoice.function.name);
  // After a tool result the model answers in text (the second turn of tool use), unless forced.
  if (toolChoice === 'auto' && lastRole === 'tool') return [];
  const matches = matchingTools(tools, prompt);
  const chosen = matches.length > 0 ? matches : toolChoice === 'required' ? [tools[0]] : [];
  return request.parallelToolCalls ? chosen.slice(0, 4) : chosen.slice(0, 1);
}

function callId(rng: Rng): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  let id = 'call_';
  for (let i = 0; i < 24; i++) id += alphabet[Math.floor(rng() * alphabet.length)];
  return id;
}

function sampleOrThrow(schema: JsonSchemaObject, ctx: SamplerContext, field: string): unknown {
  try {
    return sampleSchemaValue(schema, ctx);
  } catch (err) {
    if (err instanceof SchemaSamplingError)
      throw new ApiError('unprocessable_entity', `local-chat could not produce a value valid against ${field}: ${err.message}`);
    // The gateway's check passed a schema Ajv cannot compile after all (a reference into data, say).
    if (err instanceof UserSchemaError) throw ApiError.badRequest(schemaRefusal(field, err));
    throw err;
  }
}

/**
 * The built-in model: deterministic for a seed and prompt, offline, and honest about its
 * limits. It answers with Markov-chain prose from its corpus, calls declared tools with
 * arguments valid against their schemas, and produces JSON (any object, or a value valid against
 * a given schema) when response_format asks for it.
 */
export function generateLocalChat(request: ChatRequest, media: readonly MediaDescription[] = [], model: MarkovModel = localChatModel()): LocalChatOutput {
  const messages = request.messages;
  const last = messages[messages.length - 1];
  const lastUser = [...messages].reverse().find((m) => m.role === 'user');
  const prompt = textOf(lastUser);
  // Greedy decoding (temperature 0) is deterministic even without a seed, lengths and ids included.
  const rng = requestRng(request.seed ?? (request.temperature === 0 ? 0 : undefined), JSON.stringify(messages.map((m) => [m.role, textOf(m)])));
  const hints = hintsFrom(prompt);
  const ctx: SamplerContext = { rng, hints, phrase: () => generateText(prompt, { ...request, stop: [] }, rng, 8, 1, model).replace(/[.,;:!?]$/, '') };

  const calls = toolsToCall(request, prompt, last?.role);
  if (calls.length > 0) {
    const toolCalls: ChatToolCall[] = calls.map((tool, i) => {
      const schema = tool.function.parameters ?? { type: 'object', properties: {} };
      const args = sampleOrThrow(schema, ctx, `tools[${request.tools.indexOf(tool)}].function.parameters`);
      return { id: callId(rng), index: i, type: 'function', function: { name: tool.function.name, arguments: JSON.stringify(args) } };
    });
    return { pieces: [], content: null, toolCalls, finishReason: 'tool_calls', completionTokens: toolCallTokens(toolCalls) };
  }

  let text: string;
  const format = request.responseFormat;
  if (format.type === 'json_schema' && format.json_schema.schema !== undefined) {
    text = JSON.stringify(sampleOrThrow(format.json_schema.schema, ctx, 'response_format.json_schema.schema'));
  } else if (format.type === 'json_object' || format.type === 'json_schema') {
    text = JSON.stringify({ answer: generateText(prompt, request, rng, Math.min(request.maxTokens, 64), 1, model) });
  } else {
    let prefix = describeMedia(media);
    if (last?.role === 'tool') {
      const call = messages.flatMap((m) => m.tool_calls ?? []).find((c) => c.id === last.tool_call_id);
      prefix += `The ${call?.function.name ?? 'tool'} tool returned ${textOf(last).slice(0, 400)}. `;
    }
    const sentences = 1 + Math.floor(rng() * 3);
    text = prefix + generateText(prompt, request, rng, request.maxTokens, sentences, model);
  }
  const limited = limit(text, request);
  return {
    pieces: splitPieces(limited.text),
    content: limited.text,
    toolCalls: [],
    finishReason: limited.finish,
    completionTokens: countTextTokens(limited.text),
  };
}
