// The asynchronous queue: listen on the event stream first (the contract delivers only to
// connected clients), enqueue, and receive media_generation_completed when it is done.
//   node examples/queue-events.mjs
import { EventSource } from 'eventsource';
import { api, apiKey, baseUrl } from './connection.mjs';

const events = new EventSource(`${baseUrl}/api/events`, {
  fetch: (input, init) => fetch(input, { ...init, headers: { ...init?.headers, authorization: `Bearer ${apiKey}` } }),
});
await new Promise((resolve, reject) => {
  events.onopen = resolve;
  events.onerror = (e) => reject(new Error(`event stream: ${e.message}`));
});

// Listen before enqueueing: a generation can complete before the enqueue's answer has been read,
// and an EventSource drops every event that has no listener yet.
const completed = new Map();
let onCompleted = () => {};
events.addEventListener('media_generation_completed', (e) => {
  const event = JSON.parse(e.data);
  completed.set(event.generation_id, event);
  onCompleted();
});

const { generations } = await api('POST', '/api/ai/queue', { model: 'local-image', prompt: 'a paper boat on a puddle', num_generations: 2 });
const ids = generations.map((g) => g.generation_id);
console.log('enqueued:', ids.join(', '));

await new Promise((resolve) => {
  onCompleted = () => ids.every((id) => completed.has(id)) && resolve();
  onCompleted();
});
events.close();
for (const id of ids) {
  const event = completed.get(id);
  console.log(`completed: ${id} ${event.status} ${event.url ?? event.error}`);
}

const record = await api('GET', `/api/ai/queue/${ids[0]}`);
console.log('record:', record.status, 'cost', record.cost, 'result', record.result_url);
