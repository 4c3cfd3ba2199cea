// Images: generate and edit through the contract's routes (fetch), then the same through the
// official OpenAI SDK (client.images.generate).
//   node examples/images.mjs
import OpenAI from 'openai';
import { api, apiKey, baseUrl } from './connection.mjs';

const generated = await api('POST', '/api/ai/images/generate', {
  model: 'local-image',
  prompt: 'a lighthouse on a cliff at dusk',
  width: 512,
  height: 512,
  response_format: 'b64_json',
});
console.log('generated: seed', generated.seed, ',', generated.images[0].b64_json.length, 'base64 characters');

// The input image of an edit is a public URL or a data URI; here, the image just generated.
const edited = await api('POST', '/api/ai/images/edit', {
  model: 'local-image-edit',
  prompt: 'make it look like a watercolor painting',
  input_image: `data:image/png;base64,${generated.images[0].b64_json}`,
});
console.log('edited: temporary link', edited.images[0].url);

const client = new OpenAI({ apiKey, baseURL: `${baseUrl}/api/ai` });
const sdk = await client.images.generate({ model: 'local-image', prompt: 'a red fox in the snow', size: '256x256' });
console.log('OpenAI SDK: temporary link', sdk.data[0].url);
