import type { OpenAiImagesEngineConfig } from '@atelier/models';
import { sniffMediaType } from '@atelier/safe-fetch';
import type { EngineEnvironment, EngineOutput, EngineRequest, EngineResult, MediaEngine } from '../engine';
import { throwIfAborted, upstreamError } from '../engine-errors';
import { upstreamJson, upstreamTarget } from './upstream-http';

interface ImagesResponse {
  created?: number;
  data?: { b64_json?: string; url?: string; revised_prompt?: string }[];
}

const EXTENSIONS: Readonly<Record<string, string>> = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/webp': 'webp', 'image/gif': 'gif' };

/** gpt-image sizes for the aspect ratios people ask for. */
function sizeFor(params: Readonly<Record<string, unknown>>): string | undefined {
  if (typeof params.size === 'string') return params.size;
  if (typeof params.width === 'number' && typeof params.height === 'number') return `${params.width}x${params.height}`;
  const ar = params.aspect_ratio;
  if (typeof ar !== 'string' || ar === 'auto') return undefined;
  const [w, h] = ar.split(':').map(Number);
  return w === h ? '1024x1024' : w > h ? '1536x1024' : '1024x1536';
}

/** Our parameter names -> the Images API's. Unknown parameters are not forwarded. */
function upstreamParams(config: OpenAiImagesEngineConfig, params: Readonly<Record<string, unknown>>): Record<string, string | number> {
  const out: Record<string, string | number> = { model: config.upstream_model, prompt: String(params.prompt ?? '') };
  const n = params.num_images ?? params.n;
  if (typeof n === 'number') out.n = n;
  const size = sizeFor(params);
  if (size) out.size = size;
  if (typeof params.output_quality === 'string') out.quality = params.output_quality;
  if (typeof params.output_format === 'string') out.output_format = params.output_format === 'jpg' ? 'jpeg' : params.output_format;
  if (typeof params.output_quality === 'number' && out.output_format && out.output_format !== 'png') out.output_compression = params.output_quality;
  for (const key of ['background', 'moderation', 'style', 'quality', 'input_fidelity', 'user'])
    if (typeof params[key] === 'string' || typeof params[key] === 'number') out[key] = params[key] as string | number;
  return out;
}

/**
 * Any provider that speaks the OpenAI Images API: POST /images/generations (JSON) and
 * POST /images/edits (multipart, `image` or `image[]`). Answers may carry b64_json or a URL.
 */
export class OpenAiImagesEngine implements MediaEngine {
  constructor(
    private readonly config: OpenAiImagesEngineConfig,
    private readonly env: EngineEnvironment,
  ) {}

  async run({ model, params, signal }: EngineRequest): Promise<EngineResult> {
    const { provider, base, key, timeoutMs, retry } = upstreamTarget(this.env, model.id, this.config);
    const headers: Record<string, string> = key ? { authorization: `Bearer ${key}` } : {};
    const fields = upstreamParams(this.config, params);

    let answer: ImagesResponse;
    if (model.endpoint === '/images/edit') {
      const inputs = Array.isArray(params.input_image) ? params.input_image.map(String) : [String(params.input_image)];
      const images = await Promise.all(
        inputs.map((url, i) => this.env.fetchInput(url, { accept: ['image/*'], label: inputs.length > 1 ? `input_image[${i}]` : 'input_image', signal })),
      );
      const form = new FormData();
      for (const [name, value] of Object.entries(fields)) form.append(name, String(value));
      images.forEach((img, i) => {
        const ext = EXTENSIONS[img.contentType] ?? 'png';
        form.append(images.length > 1 ? 'image[]' : 'image', new Blob([new Uint8Array(img.data)], { type: img.contentType }), `image-${i}.${ext}`);
      });
      answer = await upstreamJson<ImagesResponse>(provider, `${base}/images/edits`, { body: form, headers, signal, timeoutMs, retry });
    } else {
      answer = await upstreamJson<ImagesResponse>(provider, `${base}/images/generations`, { body: fields, headers, signal, timeoutMs, retry });
    }
    if (!Array.isArray(answer.data) || answer.data.length === 0) throw upstreamError(provider, 'the answer has no images');
    const outputs: EngineOutput[] = [];
    for (const [i, item] of answer.data.entries()) {
      throwIfAborted(signal);
      let data: Buffer;
      let type: string | undefined;
      if (typeof item.b64_json === 'string') data = Buffer.from(item.b64_json, 'base64');
      else if (typeof item.url === 'string') {
        const fetched = await this.env.fetchInput(item.url, { accept: ['image/*'], label: `the provider's image ${i + 1}`, signal });
        data = fetched.data;
        type = fetched.contentType;
      } else throw upstreamError(provider, `image ${i + 1} has neither b64_json nor url`);
      const contentType = sniffMediaType(data) ?? type;
      if (!contentType?.startsWith('image/')) throw upstreamError(provider, `image ${i + 1} is not an image`);
      outputs.push({ data, contentType, extension: EXTENSIONS[contentType] ?? 'bin' });
    }
    return { outputs, seed: typeof params.seed === 'number' ? params.seed : undefined };
  }
}
