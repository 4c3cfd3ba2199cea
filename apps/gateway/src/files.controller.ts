import { Controller, Get, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PublicRoute } from '@atelier/auth';
import { ApiError } from '@atelier/contracts';
import { BlobStore, SignedUrls } from '@atelier/storage';

/** Types a browser shows without running anything: served inline. Anything else (HTML, SVG, XML, scripts...) is a download. */
const PASSIVE_TYPE = /^(image\/(png|jpeg|gif|webp|avif|bmp)|video\/[\w.+-]+|audio\/[\w.+-]+|text\/plain|application\/(json|octet-stream|pdf|vnd\.apache\.parquet|x-ndjson|jsonl))(;|$)/i;

/**
 * Serves temporary result links; the signature is the credential, so no API key is needed. The
 * bytes are a tenant's and this is the console's origin: nothing served here may run as a page
 * (nosniff, a sandboxing CSP, and HTML or SVG only as an attachment).
 */
@PublicRoute()
@Controller('files')
export class FilesController {
  constructor(
    private readonly blobs: BlobStore,
    private readonly urls: SignedUrls,
  ) {}

  @Get('*')
  async download(
    @Req() req: FastifyRequest<{ Params: { '*': string } }>,
    @Query('expires') expires: unknown,
    @Query('signature') signature: unknown,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const key = req.params['*'];
    const verdict = this.urls.verify(key, expires, signature);
    if (verdict === 'expired') throw ApiError.forbidden('This link has expired; request the result again for a new one');
    if (verdict !== 'ok') throw ApiError.forbidden('Invalid or tampered link signature');
    const blob = await this.blobs.get(key).catch(() => undefined);
    if (!blob) throw ApiError.notFound('The file no longer exists');
    const filename = (key.split('/').pop() ?? 'file').replace(/[^\w.-]+/g, '_');
    await reply
      .header('content-type', blob.contentType)
      .header('content-length', String(blob.size))
      .header('cache-control', 'private, max-age=300')
      .header('x-content-type-options', 'nosniff')
      .header('content-security-policy', "sandbox; default-src 'none'")
      .header('content-disposition', `${PASSIVE_TYPE.test(blob.contentType) ? 'inline' : 'attachment'}; filename="${filename}"`)
      .send(blob.body);
  }
}
