import * as fs from 'node:fs';
import * as path from 'node:path';
import { ModelCatalog, validateModelRequest, type ModelDefinition, type ValidationResult } from './index';

const catalog = ModelCatalog.fromDirectory();
const model = (id: string): ModelDefinition => {
  const found = catalog.get(id);
  if (found === undefined) throw new Error(`missing ${id}`);
  return found;
};
const image = model('local-image');
const edit = model('local-image-edit');
const video = model('local-video');
const chat = model('local-chat');

function messagesOf(result: ValidationResult): string[] {
  return result.ok ? [] : result.errors.map((e) => e.message);
}

describe('image generation (local-image)', () => {
  const body = (extra: Record<string, unknown>) => ({ model: 'local-image', prompt: 'a red fox', ...extra });

  it.each([0, 51])('rejects num_inference_steps %p with a message naming the parameter', (steps) => {
    const result = validateModelRequest(image, body({ num_inference_steps: steps }));
    expect(result).toEqual({
      ok: false,
      errors: [
        {
          field: 'num_inference_steps',
          keyword: steps === 0 ? 'minimum' : 'maximum',
          message: 'num_inference_steps must be an integer between 1 and 50',
        },
      ],
    });
  });

  it.each([1, 50])('accepts num_inference_steps %p', (steps) => {
    const result = validateModelRequest(image, body({ num_inference_steps: steps }));
    expect(result.ok).toBe(true);
  });

  it('rejects wrong types', () => {
    const result = validateModelRequest(image, body({ num_inference_steps: '20', seed: 1.5, width: 'wide', output_format: 'gif' }));
    expect(result.ok).toBe(false);
    expect(messagesOf(result)).toEqual(
      expect.arrayContaining([
        'num_inference_steps must be an integer between 1 and 50',
        'seed must be an integer between 0 and 4294967295',
        'width must be an integer between 64 and 2048',
        'output_format must be one of: png, jpg, webp',
      ]),
    );
    expect(messagesOf(validateModelRequest(image, body({ prompt: 42 })))).toEqual(['prompt must be a string']);
  });

  it('rejects unknown parameters by name', () => {
    expect(validateModelRequest(image, body({ foo: 1 }))).toEqual({
      ok: false,
      errors: [{ field: 'foo', keyword: 'additionalProperties', message: "unknown parameter 'foo'" }],
    });
  });

  it('uses the spec text for a missing or blank prompt', () => {
    expect(messagesOf(validateModelRequest(image, { model: 'local-image' }))).toEqual(['Prompt cannot be empty']);
    expect(messagesOf(validateModelRequest(image, body({ prompt: '' })))).toEqual(['Prompt cannot be empty']);
    expect(messagesOf(validateModelRequest(image, body({ prompt: '   ' })))).toEqual(['Prompt cannot be empty']);
  });

  it('rejects a body for another model and non-object bodies', () => {
    expect(messagesOf(validateModelRequest(image, body({ model: 'local-video' })))).toEqual(["model must be 'local-image'"]);
    expect(messagesOf(validateModelRequest(image, { prompt: 'x' }))).toEqual(['You must specify a model to call']);
    expect(messagesOf(validateModelRequest(image, ['x']))).toEqual(['request body must be a JSON object']);
  });

  it('fills defaults into a copy and leaves the caller body untouched', () => {
    const original = body({});
    const result = validateModelRequest(image, original);
    expect(result).toEqual({
      ok: true,
      value: { ...original, num_inference_steps: 28, guidance_scale: 3.5, output_format: 'png', output_quality: 80, response_format: 'url' },
    });
    expect(original).toEqual({ model: 'local-image', prompt: 'a red fox' });
  });

  it('accepts the queue fields only in queue mode', () => {
    expect(validateModelRequest(image, body({ num_generations: 4, target_repo: 'renders' }), { mode: 'queue' }).ok).toBe(true);
    expect(messagesOf(validateModelRequest(image, body({ num_generations: 5 }), { mode: 'queue' }))).toEqual([
      'num_generations must be an integer between 1 and 4',
    ]);
    expect(messagesOf(validateModelRequest(image, body({ num_generations: 2 })))).toEqual(["unknown parameter 'num_generations'"]);
    const queued = validateModelRequest(image, body({}), { mode: 'queue' });
    expect(queued.ok && queued.value.num_generations).toBe(1);
  });
});

describe('image editing (local-image-edit)', () => {
  const body = (extra: Record<string, unknown>) => ({ model: 'local-image-edit', prompt: 'make it blue', ...extra });

  it('accepts one image or several, as URLs or data URIs', () => {
    expect(validateModelRequest(edit, body({ input_image: 'https://example.com/a.png' })).ok).toBe(true);
    expect(validateModelRequest(edit, body({ input_image: ['https://example.com/a.png', 'data:image/png;base64,iVBORw0KGgo='] })).ok).toBe(
      true,
    );
  });

  it('requires input_image and explains what it must be', () => {
    expect(messagesOf(validateModelRequest(edit, body({})))).toEqual(['input_image is required']);
    expect(messagesOf(validateModelRequest(edit, body({ input_image: 7 })))).toEqual([
      'input_image must be a public http(s) URL or a data URI, or an array of strings',
    ]);
    expect(messagesOf(validateModelRequest(edit, body({ input_image: ['ftp://example.com/a.png'] })))).toEqual([
      'input_image[0] must be a public http(s) URL or a data URI',
    ]);
  });

  it('rejects parameters that only the generation model has', () => {
    expect(messagesOf(validateModelRequest(edit, body({ input_image: 'https://example.com/a.png', num_inference_steps: 10 })))).toEqual([
      "unknown parameter 'num_inference_steps'",
    ]);
  });
});

describe('video generation (local-video)', () => {
  const body = (extra: Record<string, unknown>) => ({ model: 'local-video', ...extra });

  it('requires exactly one of prompt and multi_prompt', () => {
    expect(messagesOf(validateModelRequest(video, body({})))).toEqual(["Either 'prompt' or 'multi_prompt' must be provided."]);
    expect(
      messagesOf(validateModelRequest(video, body({ prompt: 'a', multi_prompt: [{ prompt: 'b', duration: 3 }] }))),
    ).toEqual(["Cannot provide both 'prompt' and 'multi_prompt'."]);
    expect(validateModelRequest(video, body({ multi_prompt: [{ prompt: 'b', duration: 3 }] })).ok).toBe(true);
  });

  it('checks duration as seconds or auto', () => {
    expect(validateModelRequest(video, body({ prompt: 'waves', duration: 'auto' })).ok).toBe(true);
    expect(messagesOf(validateModelRequest(video, body({ prompt: 'waves', duration: 21 })))).toEqual([
      'duration must be an integer between 1 and 20',
    ]);
    expect(messagesOf(validateModelRequest(video, body({ prompt: 'waves', duration: 'long' })))).toEqual([
      "duration must be an integer between 1 and 20 or 'auto'",
    ]);
  });

  it('names nested fields of multi_prompt', () => {
    expect(messagesOf(validateModelRequest(video, body({ multi_prompt: [{ prompt: 'b', duration: 30, camera: 'pan' }] })))).toEqual([
      "unknown field 'multi_prompt[0].camera'",
      'multi_prompt[0].duration must be an integer between 1 and 20',
    ]);
  });

  it('fills the documented defaults', () => {
    const result = validateModelRequest(video, body({ prompt: 'waves' }));
    expect(result.ok && result.value).toMatchObject({ duration: 5, aspect_ratio: '16:9', fps: 24, generate_audio: false, response_format: 'url' });
  });
});

describe('chat completions (local-chat)', () => {
  const messages = [{ role: 'user', content: 'hello' }];
  const body = (extra: Record<string, unknown>) => ({ model: 'local-chat', messages, ...extra });

  it('bounds temperature to 0-2', () => {
    expect(messagesOf(validateModelRequest(chat, body({ temperature: 3 })))).toEqual(['temperature must be a number between 0 and 2']);
    expect(validateModelRequest(chat, body({ temperature: 0 })).ok).toBe(true);
    expect(validateModelRequest(chat, body({ temperature: 2 })).ok).toBe(true);
  });

  it('accepts the extra fields OpenAI SDKs send', () => {
    const result = validateModelRequest(chat, body({ user: 'u-1', n: 1, logprobs: false, metadata: { trace: 'x' }, store: false }));
    expect(result.ok).toBe(true);
  });

  it('uses the spec text for empty messages', () => {
    expect(messagesOf(validateModelRequest(chat, body({ messages: [] })))).toEqual(['Messages array cannot be empty']);
    expect(messagesOf(validateModelRequest(chat, { model: 'local-chat' }))).toEqual(['Messages array cannot be empty']);
  });

  it('explains bad messages and content parts', () => {
    expect(messagesOf(validateModelRequest(chat, body({ messages: [{ role: 'robot', content: 'hi' }] })))).toEqual([
      'messages[0].role must be one of: system, developer, user, assistant, tool',
    ]);
    // A chat model that accepts images but not video (local-chat itself takes both)
    const imageOnly = ModelCatalog.fromDefinitions([{ ...structuredClone(chat), capabilities: { input: ['text', 'image'], output: ['text'] } }]).get('local-chat')!;
    const parts = [
      { type: 'text', text: 'what is this?' },
      { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } },
      { type: 'video_url', video_url: { url: 'https://example.com/cat.mp4' } },
    ];
    expect(messagesOf(validateModelRequest(imageOnly, body({ messages: [{ role: 'user', content: parts }] })))).toEqual([
      'messages[0].content[2].type must be one of: text, image_url',
    ]);
    expect(validateModelRequest(imageOnly, body({ messages: [{ role: 'user', content: parts.slice(0, 2) }] })).ok).toBe(true);
    expect(validateModelRequest(chat, body({ messages: [{ role: 'user', content: parts }] })).ok).toBe(true);
  });

  it('accepts a tool-calling round trip', () => {
    const result = validateModelRequest(
      chat,
      body({
        messages: [
          { role: 'system', content: 'be brief' },
          { role: 'user', content: 'weather?' },
          { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{}' } }] },
          { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
        ],
        tools: [{ type: 'function', function: { name: 'weather', description: 'Weather now', parameters: { type: 'object' } } }],
        tool_choice: { type: 'function', function: { name: 'weather' } },
        parallel_tool_calls: false,
        response_format: { type: 'json_object' },
        stream: true,
        stream_options: { include_usage: true },
      }),
    );
    expect(result.ok).toBe(true);
  });

  it('limits max_tokens to the context window', () => {
    expect(messagesOf(validateModelRequest(chat, body({ max_tokens: 8193 })))).toEqual(['max_tokens must be an integer between 1 and 8192']);
    expect(messagesOf(validateModelRequest(chat, body({ max_completion_tokens: 0 })))).toEqual([
      'max_completion_tokens must be an integer between 1 and 8192',
    ]);
  });

  it('rejects features the model does not have', () => {
    const source = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'catalog', 'local-chat.json'), 'utf8'));
    const plain = ModelCatalog.fromDefinitions([
      { ...source, id: 'plain-chat', features: { tools: false, json_mode: false, streaming: false } },
    ]).get('plain-chat')!;
    const tools = [{ type: 'function', function: { name: 'weather' } }];
    expect(
      messagesOf(
        validateModelRequest(plain, { model: 'plain-chat', messages, tools, stream: true, response_format: { type: 'json_object' } }),
      ),
    ).toEqual([
      'streaming is not supported by model plain-chat',
      'tools are not supported by model plain-chat',
      "response_format.type must be 'text'",
    ]);
  });

  it('cannot be queued', () => {
    expect(validateModelRequest(chat, body({}), { mode: 'queue' })).toEqual({
      ok: false,
      errors: [{ field: 'model', keyword: 'queue', message: 'Model local-chat cannot be queued: only image and video models can be queued' }],
    });
  });
});
