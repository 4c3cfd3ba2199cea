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

const { generations } = await api('POST', '/api/ai/queue', { model: 'local-image', prompt: 'a paper boat on a puddle', num_generations: 2 });
const waiting = new Set(generations.map((g) => g.generation_id));
console.log('enqueued:', [...waiting].join(', '));

await new Promise((resolve) => {
  events.addEventListener('media_generation_completed', (e) => {
    const event = JSON.parse(e.data);
    if (!waiting.delete(event.generation_id)) return;
    console.log(`completed: ${event.generation_id} ${event.status} ${event.url ?? event.error}`);
    if (waiting.size === 0) resolve();
  });
});
events.close();

const record = await api('GET', `/api/ai/queue/${generations[0].generation_id}`);
console.log('record:', record.status, 'cost', record.cost, 'result', record.result_url);
