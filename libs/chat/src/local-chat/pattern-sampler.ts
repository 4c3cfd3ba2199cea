import type { Rng } from './rng';

/**
 * Produces a string matching a regular expression of the kind JSON Schemas use for `pattern`:
 * literals, escapes (\d \w \s \. ...), classes ([a-z0-9_], [^...] is approximated), groups with
 * alternation, and the quantifiers ? * + {n} {n,} {n,m}. Anchors are dropped. Look-arounds and
 * back-references are not supported: the caller validates the result and reports when it fails.
 */
export function samplePattern(pattern: string, rng: Rng): string {
  const parser = new PatternParser(pattern.replace(/^\^/, '').replace(/(?<!\\)\$$/, ''));
  const node = parser.parseAlternation();
  return render(node, rng);
}

type Node =
  | { kind: 'chars'; chars: string }
  | { kind: 'seq'; items: Node[] }
  | { kind: 'alt'; options: Node[] }
  | { kind: 'repeat'; node: Node; min: number; max: number };

const DIGITS = '0123456789';
const LOWER = 'abcdefghijklmnopqrstuvwxyz';
const WORD = `${LOWER}${LOWER.toUpperCase()}${DIGITS}_`;
const PRINTABLE = `${WORD} -.,`;

class PatternParser {
  private i = 0;
  constructor(private readonly src: string) {}

  parseAlternation(): Node {
    const options: Node[] = [this.parseSequence()];
    while (this.src[this.i] === '|') {
      this.i++;
      options.push(this.parseSequence());
    }
    return options.length === 1 ? options[0] : { kind: 'alt', options };
  }

  private parseSequence(): Node {
    const items: Node[] = [];
    while (this.i < this.src.length && this.src[this.i] !== '|' && this.src[this.i] !== ')') {
      let atom = this.parseAtom();
      atom = this.parseQuantifier(atom);
      items.push(atom);
    }
    return { kind: 'seq', items };
  }

  private parseAtom(): Node {
    const c = this.src[this.i++];
    if (c === '(') {
      if (this.src.startsWith('?:', this.i)) this.i += 2;
      const inner = this.parseAlternation();
      if (this.src[this.i] === ')') this.i++;
      return inner;
    }
    if (c === '[') return { kind: 'chars', chars: this.parseClass() };
    if (c === '\\') return { kind: 'chars', chars: this.parseEscape() };
    if (c === '.') return { kind: 'chars', chars: WORD };
    if (c === '^' || c === '$') return { kind: 'seq', items: [] };
    return { kind: 'chars', chars: c };
  }

  private parseEscape(): string {
    const e = this.src[this.i++];
    switch (e) {
      case 'd':
        return DIGITS;
      case 'w':
        return WORD;
      case 's':
        return ' ';
      case 'D':
      case 'W':
      case 'S':
        return '-';
      case 'n':
        return '\n';
      case 't':
        return '\t';
      default:
        return e ?? '\\';
    }
  }

  private parseClass(): string {
    let negated = false;
    if (this.src[this.i] === '^') {
      negated = true;
      this.i++;
    }
    let chars = '';
    while (this.i < this.src.length && this.src[this.i] !== ']') {
      let c = this.src[this.i++];
      if (c === '\\') c = this.parseEscape();
      if (this.src[this.i] === '-' && this.src[this.i + 1] !== ']' && this.i + 1 < this.src.length && c.length === 1) {
        this.i++;
        let end = this.src[this.i++];
        if (end === '\\') end = this.parseEscape();
        for (let code = c.charCodeAt(0); code <= end.charCodeAt(0); code++) chars += String.fromCharCode(code);
      } else chars += c;
    }
    this.i++;
    if (!negated) return chars || 'a';
    const allowed = [...PRINTABLE].filter((ch) => !chars.includes(ch)).join('');
    return allowed || 'x';
  }

  private parseQuantifier(node: Node): Node {
    const c = this.src[this.i];
    let min: number;
    let max: number;
    if (c === '?') [min, max] = [0, 1];
    else if (c === '*') [min, max] = [0, 3];
    else if (c === '+') [min, max] = [1, 4];
    else if (c === '{') {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(this.src.slice(this.i));
      if (!m) return node;
      min = Number(m[1]);
      max = m[2] === undefined ? min : m[3] === '' ? min + 3 : Number(m[3]);
      this.i += m[0].length - 1;
    } else return node;
    this.i++;
    if (this.src[this.i] === '?' || this.src[this.i] === '+') this.i++; // lazy/possessive: same strings
    return { kind: 'repeat', node, min, max };
  }
}

function render(node: Node, rng: Rng): string {
  switch (node.kind) {
    case 'chars':
      return node.chars[Math.floor(rng() * node.chars.length)] ?? '';
    case 'seq':
      return node.items.map((n) => render(n, rng)).join('');
    case 'alt':
      return render(node.options[Math.floor(rng() * node.options.length)], rng);
    case 'repeat': {
      const count = node.min + Math.floor(rng() * (node.max - node.min + 1));
      let out = '';
      for (let k = 0; k < count; k++) out += render(node.node, rng);
      return out;
    }
  }
}
