// OpenAI's Batch API with the official OpenAI SDK: a JSONL file of chat requests uploaded, run as a
// batch at half price, polled to the end, and its answers matched back to the questions by custom_id;
// then a background response, polled the same way.
//   node examples/batch.mjs
import OpenAI, { toFile } from 'openai';
import { apiKey, baseUrl } from './connection.mjs';

const client = new OpenAI({ apiKey, baseURL: `${baseUrl}/api/ai` });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const questions = { q1: 'Tell me about the sea.', q2: 'Tell me about mountains.', q3: 'Tell me about rivers.' };
const jsonl = Object.entries(questions)
  .map(([id, content]) => JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/chat/completions', body: { model: 'local-chat', messages: [{ role: 'user', content }], max_tokens: 30 } }))
  .join('\n');
const file = await client.files.create({ file: await toFile(Buffer.from(jsonl), 'questions.jsonl'), purpose: 'batch' });
let batch = await client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { example: 'batch.mjs' } });
console.log('batch:', batch.id, batch.status);
while (!['completed', 'failed', 'expired', 'cancelled'].includes(batch.status)) {
  await sleep(200);
  batch = await client.batches.retrieve(batch.id);
}
console.log('batch:', batch.status, `${batch.request_counts.completed}/${batch.request_counts.total} answered,`, batch.usage.total_tokens, 'tokens');
const output = (await (await client.files.content(batch.output_file_id)).text()).trim().split('\n').map((line) => JSON.parse(line));
for (const line of output) console.log(`${line.custom_id}: ${questions[line.custom_id]} -> ${line.response.body.choices[0].message.content.slice(0, 60)}`);

let response = await client.responses.create({ model: 'local-chat', input: 'Tell me about the sky.', background: true, max_output_tokens: 30 });
console.log('background response:', response.id, response.status);
while (['queued', 'in_progress'].includes(response.status)) {
  await sleep(100);
  response = await client.responses.retrieve(response.id);
}
console.log('background response:', response.status, '->', response.output_text.slice(0, 60));
