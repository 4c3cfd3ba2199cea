/**
 * A byte-level BPE tokenizer (tiktoken's algorithm) whose vocabulary lives in three typed arrays
 * instead of ~200,000 strings, arrays and Map entries. gpt-tokenizer's o200k tables made every
 * full GC of a gateway or chat process mark them: in a bare process a full GC took 14-16 ms with
 * them loaded against 2 ms without, paused on the request path. Typed arrays hold no pointers, so the collector skips
 * their contents.
 *
 * Special tokens are not recognised: their text counts as ordinary text, which is what OpenAI does
 * with message content (tiktoken with no special tokens allowed or disallowed), and what a
 * gateway must do with a user's "<|endoftext|>" instead of failing.
 */
export interface BpeVocabulary {
  /** Every token's bytes, back to back, in rank order. */
  bytes: Uint8Array;
  /** Where each rank's bytes start in `bytes`; `starts[rank + 1]` is where they end. */
  starts: Uint32Array;
  /** Open-addressing hash of the byte sequences: rank + 1, or 0 for an empty slot. */
  slots: Int32Array;
}

const utf8 = new TextEncoder();

/** What asciiCodes writes after the text: no character's code in it (those are all below 0x81). */
export const ASCII_CODES_END = 0xff;

/**
 * `text` as bytes for a hand-written pre-tokenizer (CompactBpe's `pieceEnd`): each character below
 * U+0080 as itself, every other one as 0x80, and after the last one ASCII_CODES_END, so that a
 * scanner stops at the end without testing every index against the length. Into `scratch` when it
 * holds 3 bytes per character (what TextEncoder may need to read all of the text) and one more,
 * else into a new array. Undefined when much of the text is not ASCII (its UTF-8 an eighth longer
 * than it or more: Cyrillic, CJK), where such a pre-tokenizer would leave nearly every piece to the
 * pattern, and reading it this way only costs.
 */
export function asciiCodes(text: string, scratch?: Uint8Array): Uint8Array | undefined {
  // Its first and middle characters outside ASCII: most likely all of it, not worth encoding to find out.
  if (text.charCodeAt(0) >= 0x80 && text.charCodeAt(text.length >> 1) >= 0x80) return undefined;
  const codes = scratch !== undefined && scratch.length >= text.length * 3 + 1 ? scratch : new Uint8Array(text.length * 3 + 1);
  // ASCII text, most prompts, is its own UTF-8, which TextEncoder writes at memory speed.
  const { written } = utf8.encodeInto(text, codes);
  if (written !== text.length) {
    if (written - text.length >= text.length / 8) return undefined;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      codes[i] = c < 0x80 ? c : 0x80;
    }
  }
  codes[text.length] = ASCII_CODES_END;
  return codes;
}

/** Texts up to this long have their asciiCodes written into scratch space kept between calls. */
const KEPT_CODES_CHARS = 65_536;

/**
 * Pieces that merge, up to this many bytes, are remembered in typed arrays (CompactBpe's short*
 * slots), one per slot of SHORT_PIECE_SLOTS (by hash: a newer piece takes an older one's slot),
 * with up to SHORT_PIECE_TOKENS tokens each. Longer ones go to a Map, LONG_PIECES_KEPT at most.
 */
const SHORT_PIECE_BYTES = 64;
const SHORT_PIECE_SLOTS = 8192;
const SHORT_PIECE_TOKENS = 16;
const LONG_PIECES_KEPT = 256;

/** Above every rank: a pair that is not a token (merge never joins it). */
const NO_PAIR = 0x7fffffff;

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

function hashBytes(buf: Uint8Array, start: number, end: number): number {
  let h = FNV_OFFSET;
  for (let i = start; i < end; i++) h = Math.imul(h ^ buf[i], FNV_PRIME);
  return h >>> 0;
}

/**
 * Builds the compact vocabulary from a rank list (index = rank; a string is its UTF-8 bytes, an
 * array of numbers its raw bytes, a hole an unused rank).
 */
export function buildVocabulary(ranks: readonly (string | readonly number[] | undefined)[]): BpeVocabulary {
  const encoder = new TextEncoder();
  const pieces: Uint8Array[] = new Array(ranks.length);
  let total = 0;
  for (let rank = 0; rank < ranks.length; rank++) {
    const value = ranks[rank];
    const piece = value === undefined ? new Uint8Array(0) : typeof value === 'string' ? encoder.encode(value) : Uint8Array.from(value);
    pieces[rank] = piece;
    total += piece.length;
  }
  const bytes = new Uint8Array(total);
  const starts = new Uint32Array(ranks.length + 1);
  for (let rank = 0, at = 0; rank < ranks.length; rank++) {
    starts[rank] = at;
    bytes.set(pieces[rank], at);
    at += pieces[rank].length;
    starts[rank + 1] = at;
  }
  let size = 1;
  while (size < ranks.length * 2) size <<= 1;
  const slots = new Int32Array(size);
  const mask = size - 1;
  for (let rank = 0; rank < ranks.length; rank++) {
    const [start, end] = [starts[rank], starts[rank + 1]];
    if (start === end) continue;
    let slot = hashBytes(bytes, start, end) & mask;
    while (slots[slot] !== 0) slot = (slot + 1) & mask;
    slots[slot] = rank + 1;
  }
  return { bytes, starts, slots };
}

export class CompactBpe {
  private readonly mask: number;
  /**
   * Scratch space reused by every call (calls are synchronous, so never shared); `buf` a Buffer, so
   * that a long piece's bytes read as latin1 make a key of their own (longPieces).
   */
  private buf = Buffer.allocUnsafeSlow(1024);
  private bounds = new Int32Array(1025);
  private pairRanks = new Int32Array(1025);
  private codes: Uint8Array = new Uint8Array(3 * 4096 + 1);
  /**
   * The pieces that merged lately, with their tokens: the merge is quadratic in a piece's length,
   * and the pieces that merge (words not in the vocabulary whole, identifiers, slices of a run
   * without spaces) repeat, within a prompt and across prompts (Hugging Face's tokenizers keep a
   * word cache for the same reason). A short piece's bytes, its token count and its tokens (once
   * an encode asked for them, else shortTokensKnown is 0) sit in its slot: typed arrays, which
   * the collector never traces, and no key to allocate. A long piece's key is its bytes read as
   * latin1, a string of its own: a slice of the text would be a view holding the whole prompt
   * (bodies up to 32 MiB) alive as long as the entry lives.
   */
  private readonly shortBytes = new Uint8Array(SHORT_PIECE_SLOTS * SHORT_PIECE_BYTES);
  /** 0: an empty slot. */
  private readonly shortLength = new Uint8Array(SHORT_PIECE_SLOTS);
  private readonly shortCount = new Uint8Array(SHORT_PIECE_SLOTS);
  private readonly shortTokensKnown = new Uint8Array(SHORT_PIECE_SLOTS);
  private readonly shortTokens = new Int32Array(SHORT_PIECE_SLOTS * SHORT_PIECE_TOKENS);
  private readonly longPieces = new Map<string, number[]>();
  private readonly split: RegExp;
  /**
   * The same pattern, sticky: tried first at each piece boundary with test(), which builds no match
   * array nor matched string (Russian prose, one text counted over and over: 82 -> 68 ns a character).
   */
  private readonly splitHere: RegExp;

  constructor(
    private readonly vocabulary: BpeVocabulary,
    /** The pre-tokenizer: a global, unicode RegExp splitting text into pieces merged on their own. */
    split: RegExp,
    /**
     * The same pre-tokenizer by hand for the text it can read (o200kAsciiPieceEnd): the end of the
     * piece `split` finds at `start` of a text `length` long, read as its asciiCodes, or -1 to
     * leave that piece to `split`. It only ever finds pieces of ASCII.
     */
    private readonly pieceEnd?: (codes: Uint8Array, start: number, length: number) => number,
  ) {
    this.mask = vocabulary.slots.length - 1;
    // A copy of its own: pieces() moves its lastIndex, which must not disturb whoever else holds the pattern.
    this.split = new RegExp(split.source, split.flags.includes('g') ? split.flags : `${split.flags}g`);
    this.splitHere = new RegExp(split.source, `${this.split.flags.replace('g', '')}y`);
  }

  /**
   * Calls `each` with the bounds of every piece of `text` from `from` (a piece boundary), in order:
   * by `pieceEnd` reading `codes` (codesOf the text) where it can tell, else by the pattern, one
   * match at a time (its match at a position depends only on the text from there on). Not
   * matchAll: it copies the RegExp and makes an iterator on every call, which took half the time of
   * counting short texts (a role, a sentence and a one-line system prompt: 2.1 against 1.0 us for
   * the three). Bounds rather than strings: a piece is read where it lies, from `codes` when
   * `pieceEnd` found it (so it is ASCII). Never re-entered: `each` is ours and synchronous.
   */
  private pieces(text: string, each: (start: number, end: number, codes?: Uint8Array) => void, from = 0, codes = this.codesOf(text)): void {
    const { split, splitHere } = this;
    const pieceEnd = this.pieceEnd;
    for (let at = from; at < text.length; ) {
      const end = codes ? pieceEnd!(codes, at, text.length) : -1;
      if (end > at) {
        each(at, end, codes);
        at = end;
        continue;
      }
      splitHere.lastIndex = at;
      if (splitHere.test(text) && splitHere.lastIndex > at) {
        each(at, splitHere.lastIndex);
        at = splitHere.lastIndex;
        continue;
      }
      // No piece starts here, or an empty one: the pattern finds where the next one does.
      split.lastIndex = at;
      const found = split.exec(text);
      if (found === null) return;
      // A pattern that can match nothing would otherwise find the same empty piece forever.
      if (found[0].length === 0) at = split.lastIndex + ((text.codePointAt(split.lastIndex) ?? 0) > 0xffff ? 2 : 1);
      else {
        each(found.index, found.index + found[0].length);
        at = found.index + found[0].length;
      }
    }
  }

  /** The text's asciiCodes when there is a `pieceEnd` to read them (in scratch space kept for the next call where it fits). */
  private codesOf(text: string): Uint8Array | undefined {
    if (this.pieceEnd === undefined) return undefined;
    const codes = asciiCodes(text, this.codes);
    if (codes !== undefined && codes !== this.codes && text.length <= KEPT_CODES_CHARS) this.codes = codes;
    return codes;
  }

  /** The rank of buf[start, end), or -1 when it is not a token. */
  private rankOf(buf: Uint8Array, start: number, end: number): number {
    const { bytes, starts, slots } = this.vocabulary;
    const length = end - start;
    for (let slot = hashBytes(buf, start, end) & this.mask; ; slot = (slot + 1) & this.mask) {
      const entry = slots[slot];
      if (entry === 0) return -1;
      const rank = entry - 1;
      const at = starts[rank];
      if (starts[rank + 1] - at !== length) continue;
      let same = true;
      for (let i = 0; i < length; i++)
        if (bytes[at + i] !== buf[start + i]) {
          same = false;
          break;
        }
      if (same) return rank;
    }
  }

  /** Encodes text[start, end) into scratch space; returns its byte length. */
  private load(text: string, start: number, end: number): number {
    // UTF-8 takes at most 3 bytes per UTF-16 unit.
    const length = end - start;
    if (this.buf.length < length * 3) {
      this.buf = Buffer.allocUnsafeSlow(length * 3);
      this.bounds = new Int32Array(length * 3 + 1);
      this.pairRanks = new Int32Array(length * 3 + 1);
    }
    // In JavaScript rather than TextEncoder.encodeInto: pieces are a few characters long, and the
    // native call cost more than the encoding (prose counted 5 times slower).
    const buf = this.buf;
    let n = 0;
    for (let i = start; i < end; i++) {
      let c = text.charCodeAt(i);
      if (c < 0x80) buf[n++] = c;
      else if (c < 0x800) {
        buf[n++] = 0xc0 | (c >> 6);
        buf[n++] = 0x80 | (c & 0x3f);
      } else {
        if (c >= 0xd800 && c <= 0xdfff) {
          // Read within the piece, as when each piece was a string of its own.
          const next = i + 1 < end ? text.charCodeAt(i + 1) : 0;
          if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
            c = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00);
            i++;
            buf[n++] = 0xf0 | (c >> 18);
            buf[n++] = 0x80 | ((c >> 12) & 0x3f);
            buf[n++] = 0x80 | ((c >> 6) & 0x3f);
            buf[n++] = 0x80 | (c & 0x3f);
            continue;
          }
          // A lone surrogate is written as U+FFFD, as TextEncoder does.
          c = 0xfffd;
        }
        buf[n++] = 0xe0 | (c >> 12);
        buf[n++] = 0x80 | ((c >> 6) & 0x3f);
        buf[n++] = 0x80 | (c & 0x3f);
      }
    }
    return n;
  }

  /**
   * tiktoken's merge: repeatedly join the adjacent pair with the lowest rank (the leftmost on a
   * tie) until no pair is a token. Leaves the parts' boundaries in `bounds`; returns how many parts.
   * Most pieces are short (a word's bytes), so the arrays are shifted by plain loops: copyWithin's
   * call cost more than the few elements it moved (this function was half of counting Russian prose).
   */
  private merge(n: number): number {
    const { buf, bounds, pairRanks } = this;
    let parts = n;
    for (let i = 0; i <= n; i++) bounds[i] = i;
    for (let i = 0; i + 1 < n; i++) pairRanks[i] = this.pairRank(buf, i, i + 2);
    while (parts > 1) {
      let lowest = NO_PAIR;
      let at = -1;
      for (let i = 0; i + 1 < parts; i++)
        if (pairRanks[i] < lowest) {
          lowest = pairRanks[i];
          at = i;
        }
      if (at < 0) break;
      // Drop the boundary between parts at and at + 1.
      parts--;
      for (let i = at + 1; i <= parts; i++) bounds[i] = bounds[i + 1];
      for (let i = at + 1; i + 1 < parts; i++) pairRanks[i] = pairRanks[i + 1];
      if (at + 1 < parts) pairRanks[at] = this.pairRank(buf, bounds[at], bounds[at + 2]);
      if (at > 0) pairRanks[at - 1] = this.pairRank(buf, bounds[at - 1], bounds[at + 1]);
    }
    return parts;
  }

  /** The rank of the pair buf[start, end) as merge orders it: NO_PAIR when it is not a token. */
  private pairRank(buf: Uint8Array, start: number, end: number): number {
    const rank = this.rankOf(buf, start, end);
    return rank < 0 ? NO_PAIR : rank;
  }

  /**
   * Adds the tokens of the piece text[start, end) to `out` (or only counts them); returns how many.
   * `codes`: the text's asciiCodes, when the piece is ASCII.
   */
  private piece(text: string, start: number, end: number, codes: Uint8Array | undefined, out?: number[]): number {
    // ASCII is its own UTF-8: most pieces are a token whole, looked up where they lie.
    if (codes !== undefined) {
      const whole = this.rankOf(codes, start, end);
      if (whole >= 0) {
        out?.push(whole);
        return 1;
      }
    }
    const n = this.load(text, start, end);
    if (codes === undefined) {
      const whole = this.rankOf(this.buf, 0, n);
      if (whole >= 0) {
        out?.push(whole);
        return 1;
      }
    }
    return this.merged(n, out);
  }

  /** Adds the tokens of the piece in buf[0, n), which is not a token whole, to `out` (or only counts them). */
  private merged(n: number, out?: number[]): number {
    if (n > SHORT_PIECE_BYTES) return this.mergedLong(n, out);
    const { buf, shortBytes, shortTokens } = this;
    const slot = hashBytes(buf, 0, n) & (SHORT_PIECE_SLOTS - 1);
    const at = slot * SHORT_PIECE_BYTES;
    let kept = this.shortLength[slot] === n && (out === undefined || this.shortTokensKnown[slot] === 1);
    for (let i = 0; kept && i < n; i++) kept = shortBytes[at + i] === buf[i];
    const tokensAt = slot * SHORT_PIECE_TOKENS;
    if (kept) {
      const count = this.shortCount[slot];
      if (out) for (let i = 0; i < count; i++) out.push(shortTokens[tokensAt + i]);
      return count;
    }
    const parts = this.merge(n);
    for (let i = 0; i < n; i++) shortBytes[at + i] = buf[i];
    this.shortLength[slot] = n;
    this.shortCount[slot] = parts;
    // Only an encode needs the tokens; a count saves looking them up.
    const known = out !== undefined && parts <= SHORT_PIECE_TOKENS;
    this.shortTokensKnown[slot] = known ? 1 : 0;
    if (out)
      for (let i = 0; i < parts; i++) {
        const token = this.rankOf(buf, this.bounds[i], this.bounds[i + 1]);
        if (known) shortTokens[tokensAt + i] = token;
        out.push(token);
      }
    return parts;
  }

  private mergedLong(n: number, out?: number[]): number {
    const key = this.buf.toString('latin1', 0, n);
    let tokens = this.longPieces.get(key);
    if (tokens === undefined) {
      const parts = this.merge(n);
      tokens = new Array<number>(parts);
      for (let i = 0; i < parts; i++) tokens[i] = this.rankOf(this.buf, this.bounds[i], this.bounds[i + 1]);
      if (this.longPieces.size >= LONG_PIECES_KEPT) this.longPieces.delete(this.longPieces.keys().next().value as string);
      this.longPieces.set(key, tokens);
    }
    if (out) for (const token of tokens) out.push(token);
    return tokens.length;
  }

  count(text: string): number {
    const codes = this.codesOf(text);
    let total = 0;
    let at = 0;
    // ASCII in a loop of its own, up to a piece that is the pattern's to find: most prompts end to
    // end. Most of their pieces are a token whole, looked up where they lie.
    if (codes !== undefined)
      while (at < text.length) {
        const end = this.pieceEnd!(codes, at, text.length);
        if (end <= at) break;
        total += this.rankOf(codes, at, end) >= 0 ? 1 : this.merged(this.load(text, at, end));
        at = end;
      }
    if (at < text.length) this.pieces(text, (start, end, codes) => (total += this.piece(text, start, end, codes)), at, codes);
    return total;
  }

  encode(text: string): number[] {
    const out: number[] = [];
    this.pieces(text, (start, end, codes) => this.piece(text, start, end, codes, out));
    return out;
  }

  /**
   * The text of `tokens`. A byte-order mark is kept as text; a character whose bytes the tokens end
   * in the middle of (a cut token list) is left out rather than shown as U+FFFD.
   */
  decode(tokens: readonly number[]): string {
    const { bytes, starts } = this.vocabulary;
    let length = 0;
    for (const token of tokens) length += starts[token + 1] - starts[token];
    const out = new Uint8Array(length);
    let at = 0;
    for (const token of tokens) {
      out.set(bytes.subarray(starts[token], starts[token + 1]), at);
      at += starts[token + 1] - starts[token];
    }
    // A decoder per call, streaming: an incomplete last character stays in its buffer, discarded.
    return new TextDecoder('utf-8', { ignoreBOM: true }).decode(out, { stream: true });
  }
}
