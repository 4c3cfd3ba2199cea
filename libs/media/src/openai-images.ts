import { ApiError } from '@atelier/contracts';

/** Fields of OpenAI's Images API accepted for compatibility that change nothing here. */
const IGNORED = new Set(['user', 'quality', 'style', 'background', 'moderation', 'output_compression', 'input_fidelity']);
const KNOWN = new Set(['model', 'prompt', 'n', 'size', 'response_format', 'output_format', 'target_namespace']);

/**
 * The body of `POST /api/ai/images/generations` or `/images/edits` (OpenAI's Images API, as the
 * official SDK sends it) as the contract's images/generate or images/edit body: `n` becomes
 * `num_images`, `size` (`WxH`) `width`/`height`, uploaded images data URIs in `input_image`. The
 * result is validated, priced and billed by the contract's own route.
 */
export function fromOpenAiImageRequest(body: unknown, inputImages?: string[]): Record<string, unknown> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw ApiError.badRequest('Request body must be a JSON object');
  const b = body as Record<string, unknown>;
  const unknown = Object.keys(b).filter((k) => !KNOWN.has(k) && !IGNORED.has(k));
  if (unknown.length) throw ApiError.badRequest(`Unknown field(s) for the Images API: ${unknown.join(', ')}`);
  const out: Record<string, unknown> = { model: b.model, prompt: b.prompt };
  if (b.target_namespace !== undefined) out.target_namespace = b.target_namespace;
  const n = typeof b.n === 'string' && /^\d+$/.test(b.n) ? Number(b.n) : b.n;
  if (n !== undefined && n !== null) {
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 10) throw ApiError.badRequest('n must be an integer between 1 and 10');
    if (n !== 1) out.num_images = n;
  }
  if (b.size !== undefined && b.size !== null && b.size !== 'auto') {
    const m = typeof b.size === 'string' ? /^(\d{1,5})x(\d{1,5})$/.exec(b.size) : null;
    if (!m) throw ApiError.badRequest(`size must be "<width>x<height>" (for example "1024x1024") or "auto", got ${JSON.stringify(b.size)}`);
    out.width = Number(m[1]);
    out.height = Number(m[2]);
  }
  if (b.response_format !== undefined && b.response_format !== null) out.response_format = b.response_format;
  if (b.output_format !== undefined && b.output_format !== null) out.output_format = b.output_format === 'jpeg' ? 'jpg' : b.output_format;
  if (inputImages) out.input_image = inputImages.length === 1 ? inputImages[0] : inputImages;
  return out;
}

/** The contract's image result as OpenAI's `{created, data: [{url} | {b64_json}]}`. */
export function toOpenAiImagesAnswer(result: Record<string, unknown>): { created: number; data: unknown[] } {
  return { created: result.created as number, data: (result.images as unknown[]) ?? [] };
}
