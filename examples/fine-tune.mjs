// A fine-tune from a dataset: make a Parquet file (hyparquet-writer, the writer atelier's own
// tests use), upload it to a repository, create the fine-tune from the listed example body,
// tokenize it and read the statistics.
//   node examples/fine-tune.mjs
import { parquetWriteBuffer } from 'hyparquet-writer';
import { api, apiKey, baseUrl } from './connection.mjs';

const me = await api('GET', '/api/credits');
const namespace = me.namespace;
const repo = `example-${Date.now().toString(36)}`;
await api('POST', '/api/repos', { name: repo, namespace });

// A question/answer dataset: the columns text_generation reads.
const dataset = parquetWriteBuffer({
  columnData: [
    { name: 'question', data: ['What is the capital of France?', 'How many legs has a spider?', 'What colour is the sky?'], type: 'STRING' },
    { name: 'answer', data: ['Paris.', 'Eight.', 'Blue, on a clear day.'], type: 'STRING' },
  ],
});
const form = new FormData();
form.append('files[]', new Blob([dataset]), 'train.parquet');
form.append('message', 'a tiny Q&A dataset');
const upload = await fetch(`${baseUrl}/api/repos/${namespace}/${repo}/file/main/`, { method: 'PUT', headers: { authorization: `Bearer ${apiKey}` }, body: form });
if (upload.status !== 201) throw new Error(`upload answered ${upload.status}: ${await upload.text()}`);
console.log('uploaded: main/train.parquet by', (await upload.json()).commit.author);

// What can be fine-tuned: base models, training_params and an example body per script type.
const { data } = await api('GET', '/api/fine_tunes/base_models');
const text = data.find((d) => d.script_type === 'text_generation');
console.log('text_generation base models:', text.base_models.join(', '));

const { fine_tune } = await api('POST', `/api/repos/${namespace}/${repo}/fine_tunes`, { ...text.example, training_params: { ...text.example.training_params, epochs: 2 } });
console.log('created:', fine_tune.id, fine_tune.status);

await api('POST', `/api/repos/${namespace}/${repo}/fine_tunes/${fine_tune.id}/tokenize`);
for (;;) {
  const { fine_tune: current } = await api('GET', `/api/repos/${namespace}/${repo}/fine_tunes/${fine_tune.id}`);
  if (current.status === 'tokenized' || current.status === 'errored') {
    console.log('tokenized:', current.status, JSON.stringify(current.tokenization));
    break;
  }
  await new Promise((r) => setTimeout(r, 250));
}
