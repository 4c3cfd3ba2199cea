import { rowCounter } from './dataset-rows';
import { validateTrainingParams } from './training-params';

const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const MP4 = new Uint8Array([0, 0, 0, 0x18, 0x66, 0x74, 0x79, 0x70, 0x69, 0x73, 0x6f, 0x6d]);

describe('dataset rows', () => {
  const chat = rowCounter('text_chat_messages', validateTrainingParams('text_chat_messages', { messages_column: 'm' }).params, 0, 'qwen3');

  it.each([
    ['a JSON string', JSON.stringify([{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'yo' }])],
    ['a list of structs', [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'yo' }]],
    ['ShareGPT from/value', [{ from: 'human', value: 'hi' }, { from: 'gpt', value: 'yo' }]],
    ['text content parts', [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }, { role: 'assistant', content: 'yo' }]],
  ])('accepts conversations as %s', (_label, value) => {
    expect(chat({ m: value })).toEqual({
      ok: true,
      texts: ['<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nyo<|im_end|>\n'],
      extraTokens: 0,
      images: 0,
    });
  });

  it.each([
    [null, 'is missing (null)'],
    ['{"role":', 'is not a JSON list of messages'],
    [[], 'is an empty conversation'],
    [[{ role: 'robot', content: 'x' }], 'has role "robot"'],
    [[{ role: 'user', content: 5 }], 'content must be a string, got number'],
    [[{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }], 'has non-text content parts'],
    [[{ role: 'user', content: 'q' }], 'has no assistant message to learn from'],
  ])('rejects the conversation %j', (value, reason) => {
    const verdict = chat({ m: value });
    expect(verdict.ok).toBe(false);
    expect(verdict.ok === false && verdict.reason).toContain(reason);
  });

  it('checks image cells: URLs, repository paths, bytes, HF Image structs; video only for image_to_video', () => {
    const image = rowCounter('image_generation', validateTrainingParams('image_generation', { caption_column: 'c', image_column: 'i' }).params, 0, undefined);
    expect(image({ c: 'cap', i: 'https://x.test/a.png' })).toMatchObject({ ok: true, texts: ['cap'], repoPaths: [] });
    expect(image({ c: 'cap', i: './imgs/a.png' })).toMatchObject({ ok: true, repoPaths: ['imgs/a.png'] });
    expect(image({ c: 'cap', i: PNG })).toMatchObject({ ok: true });
    expect(image({ c: 'cap', i: { bytes: PNG, path: 'a.png' } })).toMatchObject({ ok: true, repoPaths: [] });
    expect(image({ c: 'cap', i: { bytes: null, path: 'imgs/b.png' } })).toMatchObject({ ok: true, repoPaths: ['imgs/b.png'] });
    expect(image({ c: 'cap', i: MP4 })).toEqual({ ok: false, reason: "image (column 'i') bytes are not a recognized image format" });
    expect(image({ c: 'cap', i: 'ftp://x/a.png' })).toMatchObject({ ok: false });
    expect(image({ c: 'cap', i: '../secret.png' })).toMatchObject({ ok: false });
    expect(image({ c: new TextEncoder().encode('bytes caption'), i: PNG })).toMatchObject({ ok: true, texts: ['bytes caption'] });
    expect(image({ c: new Uint8Array([0xff, 0xfe, 0xfd]), i: PNG })).toEqual({ ok: false, reason: "caption (column 'c') is not valid UTF-8 text" });
    const video = rowCounter('image_to_video', validateTrainingParams('image_to_video', { caption_column: 'c', image_column: 'i' }).params, 0, undefined);
    expect(video({ c: 'cap', i: MP4 })).toMatchObject({ ok: true });
  });
});
