import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { AppConfig } from '@atelier/config';
import { ApiError } from '@atelier/contracts';
import { multipartUploadItems } from '@atelier/runtime';

/**
 * An OpenAI Images API edit form (`image` or `image[]` files, `prompt`, `model`, `n`, ...): its
 * fields, and each image as a data URI. A mask is refused: no engine here takes one.
 *
 * Bounded while the body streams in, before anything is kept: at most EDIT_MAX_IMAGES image parts
 * (the next part is refused on its headers, unread), each at most MEDIA_FETCH_MAX_BYTES (the bound
 * of any input image), all together at most EDIT_MAX_TOTAL_BYTES. Each image is base64-encoded as
 * its bytes arrive, so a request holds about 4/3 of the bytes it was allowed, never the whole body
 * twice over: one request of a hundred 50 MiB parts once took the gateway past 20 GB.
 */
export async function openAiEditForm(req: FastifyRequest, config: AppConfig): Promise<{ fields: Record<string, string>; images: string[]; digest: string }> {
  const fields: Record<string, string> = {};
  const images: string[] = [];
  const imageDigests: string[] = [];
  const perImage = Math.min(config.MEDIA_FETCH_MAX_BYTES, config.EDIT_MAX_TOTAL_BYTES);
  let total = 0;
  for await (const item of multipartUploadItems(req, config)) {
    if (item.kind === 'field') {
      fields[item.name] = item.value;
      continue;
    }
    if (item.fieldname !== 'image' && item.fieldname !== 'image[]') {
      item.stream.destroy();
      throw ApiError.badRequest(item.fieldname === 'mask' ? 'mask is not supported: describe the change in the prompt' : `Unknown file field '${item.fieldname}'; send the image as 'image'`);
    }
    if (images.length >= config.EDIT_MAX_IMAGES) {
      item.stream.destroy();
      throw new ApiError('payload_too_large', `An edit takes at most ${config.EDIT_MAX_IMAGES} images (EDIT_MAX_IMAGES)`);
    }
    const encoded: string[] = [];
    const hash = createHash('sha256');
    // 0-2 bytes carried to the next chunk, so every piece encodes a multiple of 3 bytes and the pieces join into one valid base64 text.
    let carry = Buffer.alloc(0);
    let size = 0;
    for await (const chunk of item.stream as AsyncIterable<Buffer>) {
      size += chunk.length;
      total += chunk.length;
      if (size > perImage || total > config.EDIT_MAX_TOTAL_BYTES) {
        item.stream.destroy();
        throw new ApiError(
          'payload_too_large',
          size > perImage
            ? `An image is larger than ${perImage} bytes (MEDIA_FETCH_MAX_BYTES, EDIT_MAX_TOTAL_BYTES)`
            : `The images of an edit may total at most ${config.EDIT_MAX_TOTAL_BYTES} bytes (EDIT_MAX_TOTAL_BYTES)`,
        );
      }
      hash.update(chunk);
      const bytes = carry.length > 0 ? Buffer.concat([carry, chunk]) : chunk;
      const whole = bytes.length - (bytes.length % 3);
      encoded.push(bytes.toString('base64', 0, whole));
      carry = Buffer.from(bytes.subarray(whole));
    }
    encoded.push(carry.toString('base64'));
    images.push(`data:${item.mimetype || 'application/octet-stream'};base64,${encoded.join('')}`);
    imageDigests.push(`${item.mimetype || 'application/octet-stream'}:${hash.digest('hex')}`);
  }
  if (images.length === 0) throw ApiError.badRequest("An image to edit is required (multipart file field 'image')");
  // What an Idempotency-Key retry is compared by: the fields whatever their order, and each image by its bytes' SHA-256, in order.
  const digest = createHash('sha256')
    .update(JSON.stringify([Object.entries(fields).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)), imageDigests]))
    .digest('hex');
  return { fields, images, digest };
}
