// What a running atelier must answer through its gateway, for `npm run images:smoke` and
// `npm run k8s:play`: the web console, a chat completion, a synchronous image, and a queued
// generation with its completion event on an open event stream and its result served.

export function expect(condition, message) {
  if (!condition) throw new Error(message);
}

/** `step(message)` reports each check passed; `cleanups` gets what to close if one fails. */
export async function checkThroughGateway({ baseUrl, apiKey, step, cleanups }) {
  const { EventSource } = await import('eventsource');
  const call = async (method, route, body) => {
    const res = await fetch(`${baseUrl}${route}`, {
      method,
      headers: { authorization: `Bearer ${apiKey}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const json = await res.json();
    expect(res.ok, `${method} ${route} answered ${res.status}: ${JSON.stringify(json)}`);
    return json;
  };

  const page = await fetch(`${baseUrl}/console/`);
  const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(await page.text())?.[1];
  expect(page.ok && page.headers.get('content-security-policy')?.includes("script-src 'self'") && script, `the gateway image serves no console (${page.status})`);
  expect((await fetch(`${baseUrl}${script}`)).ok, `the console's script ${script} is missing from the gateway image`);
  step('the gateway serves the web console at /console');

  const chat = await call('POST', '/api/ai/chat/completions', { model: 'local-chat', messages: [{ role: 'user', content: 'Tell me about the sea.' }], max_tokens: 20 });
  expect(chat.choices?.[0]?.message?.content?.length > 0 && chat.usage?.completion_tokens > 0, `chat: no answer: ${JSON.stringify(chat)}`);
  step(`chat: "${chat.choices[0].message.content.slice(0, 40)}..." (${chat.usage.completion_tokens} tokens)`);

  const image = await call('POST', '/api/ai/images/generate', { model: 'local-image', prompt: 'a lighthouse', width: 256, height: 256, response_format: 'b64_json' });
  const png = Buffer.from(image.images?.[0]?.b64_json ?? '', 'base64');
  expect(png.subarray(1, 4).toString() === 'PNG' && png.length > 1000, 'sync image: not a PNG');
  step(`sync image: a ${png.length}-byte PNG`);

  // Listen first: the event stream delivers only to connected clients.
  const events = new EventSource(`${baseUrl}/api/events`, {
    fetch: (input, init) => fetch(input, { ...init, headers: { ...init?.headers, authorization: `Bearer ${apiKey}` } }),
  });
  cleanups.push(() => events.close());
  await new Promise((resolve, reject) => {
    events.onopen = resolve;
    events.onerror = (e) => reject(new Error(`event stream: ${e.message}`));
  });
  const completed = new Promise((resolve) => events.addEventListener('media_generation_completed', (e) => resolve(JSON.parse(e.data))));
  const { generations } = await call('POST', '/api/ai/queue', { model: 'local-image', prompt: 'a paper boat', width: 256, height: 256 });
  const id = generations[0].generation_id;
  const event = await Promise.race([completed, new Promise((_, reject) => setTimeout(() => reject(new Error('no media_generation_completed within 60 s')), 60_000))]);
  expect(event.generation_id === id && event.status === 'succeeded', `queue: unexpected event ${JSON.stringify(event)}`);
  const record = await call('GET', `/api/ai/queue/${id}`);
  const output = await fetch(record.result_url);
  expect(output.ok && output.headers.get('content-type')?.startsWith('image/'), `queue: result_url answered ${output.status}`);
  step(`queued generation: media_generation_completed ${event.status}, result served (${(await output.arrayBuffer()).byteLength} bytes)`);
  events.close();

}
