// Embeddings with the official OpenAI SDK (its default base64 encoding, decoded by the SDK), and the
// nearest of a few documents to a question by cosine similarity.
//   node examples/embeddings.mjs
import OpenAI from 'openai';
import { apiKey, baseUrl } from './connection.mjs';

const client = new OpenAI({ apiKey, baseURL: `${baseUrl}/api/ai` });

const documents = ['The cat sat on the warm mat.', 'Quarterly revenue grew in Europe.', 'Mountains are covered in snow in winter.'];
const question = 'Where did the cat sit?';
const answer = await client.embeddings.create({ model: 'local-embed', input: [question, ...documents] });
console.log('vectors:', answer.data.length, 'of', answer.data[0].embedding.length, 'dimensions');
console.log('usage:', answer.usage.prompt_tokens, 'tokens');

const cosine = (a, b) => a.reduce((sum, x, i) => sum + x * b[i], 0) / Math.sqrt(a.reduce((s, x) => s + x * x, 0) * b.reduce((s, x) => s + x * x, 0));
const [q, ...docs] = answer.data.map((d) => d.embedding);
const ranked = docs.map((vector, i) => ({ text: documents[i], score: cosine(q, vector) })).sort((a, b) => b.score - a.score);
for (const { text, score } of ranked) console.log(`${score.toFixed(3)}  ${text}`);
console.log('nearest:', ranked[0].text);
