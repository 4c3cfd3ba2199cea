// Chat completions with the official OpenAI SDK: a plain answer, a streamed one, and a tool call.
//   node examples/chat.mjs
import OpenAI from 'openai';
import { apiKey, baseUrl } from './connection.mjs';

const client = new OpenAI({ apiKey, baseURL: `${baseUrl}/api/ai` });

const plain = await client.chat.completions.create({
  model: 'local-chat',
  messages: [{ role: 'user', content: 'Tell me about the sea.' }],
  max_tokens: 40,
});
console.log('plain:', plain.choices[0].message.content);
console.log('usage:', plain.usage);

process.stdout.write('stream: ');
const stream = await client.chat.completions.create({
  model: 'local-chat',
  messages: [{ role: 'user', content: 'Tell me about the mountains.' }],
  max_tokens: 40,
  stream: true,
});
for await (const chunk of stream) process.stdout.write(chunk.choices[0]?.delta?.content ?? '');
process.stdout.write('\n');

const tools = await client.chat.completions.create({
  model: 'local-chat',
  messages: [{ role: 'user', content: 'What is the weather in Lisbon?' }],
  tools: [
    {
      type: 'function',
      function: { name: 'get_weather', description: 'Current weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
    },
  ],
  tool_choice: 'required',
});
const call = tools.choices[0].message.tool_calls[0];
console.log('tool call:', call.function.name, call.function.arguments);
