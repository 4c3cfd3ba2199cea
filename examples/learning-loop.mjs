// The learning loop, from traffic to a fine-tune of it that wins: 60 chat completions kept with
// store: true (the official OpenAI SDK), judged with feedback on a metric of the namespace, the
// good ones exported as a Parquet dataset into a repo, a fine-tune of atelier/local-chat trained
// on that file by the built-in trainer of `npm start` and deployed, then an adaptive experiment
// between local-chat and the fine-tune whose weights follow the feedback, and a promote.
//   node examples/learning-loop.mjs
import OpenAI from 'openai';
import { api, apiKey, baseUrl } from './connection.mjs';

const client = new OpenAI({ apiKey, baseURL: `${baseUrl}/api/ai` });
const { namespace } = await api('GET', '/api/credits');
const run = Date.now().toString(36);
const repo = `loop-${run}`;
await api('POST', '/api/repos', { name: repo, namespace });
// A metric of the namespace; one per run of this example (names are unique in a namespace).
const metric = `good-${run}`;
await api('POST', '/api/feedback_metrics', { name: metric, type: 'boolean', optimize: 'max' });

// Traffic: questions about a lighthouse, each answer kept as a stored completion with metadata.
const topics = ['the lamp', 'the keeper', 'the fog', 'the stairs', 'the storm', 'the ships'];
const ids = [];
for (let i = 0; i < 60; i++) {
  const topic = topics[i % topics.length];
  const answer = await client.chat.completions.create({
    model: 'local-chat',
    messages: [
      { role: 'system', content: 'You answer questions about the lighthouse.' },
      { role: 'user', content: `Tell me about ${topic} of the lighthouse.` },
    ],
    max_tokens: 40,
    seed: i,
    store: true,
    metadata: { example: 'learning-loop', run },
  });
  ids.push(answer.id);
  // A stand-in for a person's thumbs up or down: two answers of every three are good.
  await api('POST', '/api/ai/feedback', { target_id: answer.id, metric, value: i % 3 !== 2, comment: `answer ${i}` });
}
const stored = [];
for await (const c of client.chat.completions.list({ metadata: { run }, limit: 100 })) stored.push(c);
console.log(`stored: ${stored.length} completions, ${stored.filter((c) => c.feedback[0]?.value === 1).length} judged good`);

// The good ones become a dataset: the text_chat_messages layout, committed to the repo.
const exported = await api('POST', '/api/ai/chat/completions/export', { filter: { metric, min_value: 1, metadata: { run } }, namespace, repo, path: 'data/good.parquet' });
console.log(`exported: ${exported.rows} rows to ${exported.path}, ${exported.skipped} skipped (${exported.commit.message})`);

const fineTunes = `/api/repos/${namespace}/${repo}/fine_tunes`;
const { fine_tune } = await api('POST', fineTunes, {
  name: `lighthouse-${run}`,
  base_model: 'atelier/local-chat',
  script_type: 'text_chat_messages',
  resource: 'main/data/good.parquet',
  training_params: { messages_column: 'messages', save_strategy: 'steps', save_steps_ratio: 0.5 },
});
const until = async (done) => {
  for (;;) {
    const { fine_tune: current } = await api('GET', `${fineTunes}/${fine_tune.id}`);
    if (done(current) || current.status === 'errored') return current;
    await new Promise((r) => setTimeout(r, 250));
  }
};
await api('POST', `${fineTunes}/${fine_tune.id}/tokenize`);
const tokenized = await until((f) => f.status === 'tokenized');
console.log(`tokenized: ${tokenized.tokenization.valid_rows} valid rows of ${tokenized.tokenization.rows}`);
await api('POST', `${fineTunes}/${fine_tune.id}/actions/run`);
const ended = await until((f) => ['completed', 'stopped'].includes(f.status));
if (ended.status !== 'completed') throw new Error(`the run ended ${ended.status}: ${ended.error}`);
const { checkpoints } = await api('GET', `${fineTunes}/${fine_tune.id}/checkpoints`);
const { model } = await api('POST', `${fineTunes}/${fine_tune.id}/checkpoints/${checkpoints.at(-1).step}/deploy`, { deployment_type: 'fast' });
console.log('deployed:', model.id);
const answer = await client.chat.completions.create({ model: model.id, messages: [{ role: 'user', content: 'Tell me about the lighthouse.' }], max_tokens: 40, seed: 1 });
console.log('answer:', answer.choices[0].message.content);

// An experiment: the name is a model id of the namespace, split between the two models; adaptive,
// so its weights follow the metric. Its answers are stored by default, so feedback can name them.
const experiment = `lighthouse-ab-${run}`;
await api('POST', '/api/ai/experiments', {
  name: experiment,
  variants: [
    { model: 'local-chat', weight: 0.5 },
    { model: model.id, weight: 0.5 },
  ],
  metric,
  mode: 'adaptive',
  sticky_by: 'user',
});
const shares = (e) => e.variants.map((v) => `${v.model} ${v.weight}`).join(' / ');
console.log(`experiment: ${experiment} ${shares(await api('GET', `/api/ai/experiments/${experiment}`))}`);
for (let u = 0; u < 40; u++) {
  const reply = await client.chat.completions.create({ model: experiment, messages: [{ role: 'user', content: `Tell me about ${topics[u % topics.length]}.` }], max_tokens: 30, user: `visitor-${u}` });
  // A stand-in for people who prefer the fine-tune's answers: its answers are judged good, local-chat's not.
  await api('POST', '/api/ai/feedback', { target_id: reply.id, metric, value: reply.model === model.id });
}
const judged = await api('GET', `/api/ai/experiments/${experiment}`);
console.log(`weights: ${shares(judged)}`);
for (const v of judged.variants) console.log(`variant: ${v.model} ${v.requests} requests, p50 ${v.latency_ms.p50} ms, ${v.metric.mean?.toFixed(2)} good [${v.metric.ci95?.join(', ')}]`);
await api('POST', `/api/ai/experiments/${experiment}/promote`, { model: model.id });
const after = await client.chat.completions.create({ model: experiment, messages: [{ role: 'user', content: 'And the lamp?' }], max_tokens: 30, user: 'visitor-0' });
console.log(`promoted: ${model.id}; answered by ${after.model}`);
