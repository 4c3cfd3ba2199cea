import { Controller, Get, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PublicRoute } from '@atelier/auth';
import { ApiError } from '@atelier/contracts';
import { BlobStore, SignedUrls } from '@atelier/storage';

/** Serves temporary result links; the signature is the credential, so no API key is needed. */
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
    await reply
      .header('content-type', blob.contentType)
      .header('content-length', String(blob.size))
      .header('cache-control', 'private, max-age=300')
      .send(blob.body);
  }
}
