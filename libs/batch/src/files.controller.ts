import { Controller, Delete, Get, HttpCode, Inject, Param, Post, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CountsAsWork, CurrentCaller, type Caller, RequiresScope } from '@atelier/auth';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { multipartUploadItems } from '@atelier/runtime';
import { FilesService } from './files.service';

/**
 * OpenAI's Files API (the SDK's `client.files.*` with baseURL `<atelier>/api/ai`), for batch
 * input: the caller's namespace's files (the one its key bills to).
 */
@Controller('api/ai/files')
@RequiresScope('batches')
export class BatchFilesController {
  constructor(
    private readonly files: FilesService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  @Post()
  @CountsAsWork()
  @HttpCode(200)
  upload(@CurrentCaller() caller: Caller, @Req() req: FastifyRequest) {
    const parts = multipartUploadItems(req, this.config, { maxFileBytes: this.config.FILES_MAX_BYTES, name: 'FILES_MAX_BYTES' });
    return this.files.upload({ namespaceId: caller.namespaceId, namespace: caller.namespace, userId: caller.userId }, parts);
  }

  @Get()
  list(@CurrentCaller() caller: Caller, @Query() query: Record<string, unknown>) {
    return this.files.list(caller.namespaceId, query);
  }

  @Get(':id')
  get(@CurrentCaller() caller: Caller, @Param('id') id: string) {
    return this.files.get(caller.namespaceId, id);
  }

  @Get(':id/content')
  async content(@CurrentCaller() caller: Caller, @Param('id') id: string, @Res() reply: FastifyReply): Promise<void> {
    const { file, blob } = await this.files.content(caller.namespaceId, id);
    await reply
      .header('content-type', 'application/octet-stream')
      .header('content-length', String(blob.size))
      .header('content-disposition', `attachment; filename*=UTF-8''${encodeURIComponent(file.filename)}`)
      .send(blob.body);
  }

  @Delete(':id')
  delete(@CurrentCaller() caller: Caller, @Param('id') id: string) {
    return this.files.delete(caller.namespaceId, id);
  }
}
