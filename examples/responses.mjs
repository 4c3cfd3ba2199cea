// The Responses API with the official OpenAI SDK: an answer, a stream, and a function call continued with
// previous_response_id (atelier keeps the conversation, whatever the upstream speaks).
//   node examples/responses.mjs
import OpenAI from 'openai';
import { apiKey, baseUrl } from './connection.mjs';

const client = new OpenAI({ apiKey, baseURL: `${baseUrl}/api/ai` });

const answer = await client.responses.create({ model: 'local-chat', instructions: 'Be brief.', input: 'Tell me about the sea.', max_output_tokens: 40 });
console.log('response:', answer.id, answer.status);
console.log('text:', answer.output_text);
console.log('usage:', answer.usage.input_tokens, 'in,', answer.usage.output_tokens, 'out');

process.stdout.write('stream: ');
const stream = client.responses.stream({ model: 'local-chat', input: 'Tell me about the mountains.', max_output_tokens: 40 });
stream.on('response.output_text.delta', (event) => process.stdout.write(event.delta));
const streamed = await stream.finalResponse();
process.stdout.write(`\nstreamed: ${streamed.status}\n`);

const tools = [
  { type: 'function', name: 'get_weather', description: 'Current weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
];
const first = await client.responses.create({ model: 'local-chat', input: 'What is the weather in Lisbon?', tools, tool_choice: 'required' });
const call = first.output.find((item) => item.type === 'function_call');
console.log('function call:', call.name, call.arguments);
const second = await client.responses.create({
  model: 'local-chat',
  previous_response_id: first.id,
  input: [{ type: 'function_call_output', call_id: call.call_id, output: JSON.stringify({ temperature: 21, sky: 'clear' }) }],
  tools,
});
console.log('after the tool:', second.output_text);
const items = await client.responses.inputItems.list(second.id);
console.log('conversation:', items.data.map((item) => item.type).reverse().join(' > '));
