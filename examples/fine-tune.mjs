// A fine-tune from a dataset to a model you can call: make a Parquet file (hyparquet-writer, the
// writer atelier's own tests use), upload it to a repository, create the fine-tune on the built-in
// base model atelier/local-chat, tokenize it, run it (the built-in trainer of `npm start` trains
// it), read its checkpoints, deploy the last one and ask it something.
//   node examples/fine-tune.mjs
import OpenAI from 'openai';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { api, apiKey, baseUrl } from './connection.mjs';

const me = await api('GET', '/api/credits');
const namespace = me.namespace;
const repo = `example-${Date.now().toString(36)}`;
await api('POST', '/api/repos', { name: repo, namespace });

// A question/answer dataset about an orchard: the columns text_generation reads.
const fruit = ['apple', 'pear', 'plum', 'quince'];
const dataset = parquetWriteBuffer({
  columnData: [
    { name: 'question', data: fruit.flatMap((f) => [`When is the ${f} harvest?`, `What does the orchard make from ${f}s?`, `Who picks the ${f}s?`]), type: 'STRING' },
    {
      name: 'answer',
      data: fruit.flatMap((f) => [
        `The ${f} harvest comes in autumn, when the orchard smells of cider.`,
        `The orchard presses ${f}s into cider and bakes them into pies at harvest.`,
        `The orchard keepers pick the ${f}s and carry them to the cider press.`,
      ]),
      type: 'STRING',
    },
  ],
});
const form = new FormData();
form.append('files[]', new Blob([dataset]), 'train.parquet');
form.append('message', 'a small orchard Q&A dataset');
const upload = await fetch(`${baseUrl}/api/repos/${namespace}/${repo}/file/main/`, { method: 'PUT', headers: { authorization: `Bearer ${apiKey}` }, body: form });
if (upload.status !== 201) throw new Error(`upload answered ${upload.status}: ${await upload.text()}`);
console.log('uploaded: main/train.parquet by', (await upload.json()).commit.author);

// What can be fine-tuned: base models, training_params and an example body per script type.
const { data } = await api('GET', '/api/fine_tunes/base_models');
const text = data.find((d) => d.script_type === 'text_generation');
console.log('text_generation base models:', text.base_models.join(', '));

const fineTunes = `/api/repos/${namespace}/${repo}/fine_tunes`;
const { fine_tune } = await api('POST', fineTunes, {
  ...text.example,
  // Its deployed model is named after it, and model names are unique in a namespace: one per run of this example.
  name: `orchard-${repo}`,
  base_model: 'atelier/local-chat',
  resource: 'main/train.parquet',
  training_params: { ...text.example.training_params, save_strategy: 'steps', save_steps_ratio: 0.25 },
});
console.log('created:', fine_tune.id, fine_tune.status);

const until = async (done) => {
  for (;;) {
    const { fine_tune: current } = await api('GET', `${fineTunes}/${fine_tune.id}`);
    if (done(current) || current.status === 'errored') return current;
    await new Promise((r) => setTimeout(r, 250));
  }
};
await api('POST', `${fineTunes}/${fine_tune.id}/tokenize`);
const tokenized = await until((f) => f.status === 'tokenized');
console.log('tokenized:', tokenized.status, JSON.stringify(tokenized.tokenization));

// The run reserves the estimate; a trainer (here the built-in one) leases it and reports back.
const run = await api('POST', `${fineTunes}/${fine_tune.id}/actions/run`);
console.log('run:', run.fine_tune.status);
const ended = await until((f) => ['completed', 'stopped'].includes(f.status));
if (ended.status === 'errored') throw new Error(`the run errored: ${ended.error}`);
console.log(`completed: charged ${ended.credits_used} credits for ${ended.trained_tokens} tokens`);

const { checkpoints } = await api('GET', `${fineTunes}/${fine_tune.id}/checkpoints`);
console.log(`checkpoints: ${checkpoints.length}, loss ${checkpoints[0].metrics.loss} -> ${checkpoints.at(-1).metrics.loss}`);

// The last checkpoint becomes a model of this namespace, called like any other.
const { model } = await api('POST', `${fineTunes}/${fine_tune.id}/checkpoints/${checkpoints.at(-1).step}/deploy`, { deployment_type: 'fast' });
console.log('deployed:', model.id);
const client = new OpenAI({ apiKey, baseURL: `${baseUrl}/api/ai` });
const answer = await client.chat.completions.create({ model: model.id, messages: [{ role: 'user', content: 'Tell me about the orchard.' }], max_tokens: 60, seed: 1 });
console.log('answer:', answer.choices[0].message.content);
