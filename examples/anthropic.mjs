// Anthropic's Messages API with the official Anthropic SDK (what Claude Code speaks): an answer, a stream,
// a tool round trip and a token count, over the built-in model; any chat model of the catalog works.
//   node examples/anthropic.mjs
import Anthropic from '@anthropic-ai/sdk';
import { apiKey, baseUrl } from './connection.mjs';

// The SDK sends the key as x-api-key, as Claude Code does with ANTHROPIC_API_KEY.
const client = new Anthropic({ apiKey, baseURL: `${baseUrl}/api/anthropic` });

const message = await client.messages.create({ model: 'local-chat', max_tokens: 60, system: 'Be brief.', messages: [{ role: 'user', content: 'Tell me about the sea.' }] });
console.log('message:', message.id, message.stop_reason);
console.log('text:', message.content.map((block) => block.text ?? '').join(''));
console.log('usage:', message.usage.input_tokens, 'in,', message.usage.output_tokens, 'out');

process.stdout.write('stream: ');
const stream = client.messages.stream({ model: 'local-chat', max_tokens: 40, messages: [{ role: 'user', content: 'Tell me about the mountains.' }] });
stream.on('text', (text) => process.stdout.write(text));
const streamed = await stream.finalMessage();
process.stdout.write(`\nstreamed: ${streamed.stop_reason}\n`);

const tools = [{ name: 'get_weather', description: 'Current weather of a city', input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }];
const question = { role: 'user', content: 'What is the weather in Lisbon?' };
const first = await client.messages.create({ model: 'local-chat', max_tokens: 200, tools, tool_choice: { type: 'any' }, messages: [question] });
const call = first.content.find((block) => block.type === 'tool_use');
console.log('tool use:', call.name, JSON.stringify(call.input));
const second = await client.messages.create({
  model: 'local-chat',
  max_tokens: 60,
  tools,
  messages: [question, { role: 'assistant', content: first.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: JSON.stringify({ temperature: 21, sky: 'clear' }) }] }],
});
console.log('after the tool:', second.content.map((block) => block.text ?? '').join(''));

const counted = await client.messages.countTokens({ model: 'local-chat', messages: [question], tools });
console.log('tokens:', counted.input_tokens);
