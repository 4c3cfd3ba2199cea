import { Controller, Get, HttpCode, Post, Query } from '@nestjs/common';
import { CurrentCaller, type Caller, RequiresScope } from '@atelier/auth';
import { GenerationQueue } from './generation-queue.service';

/**
 * The signing secret of a namespace's webhooks (Standard Webhooks): members of the namespace
 * only. Rotating replaces it at once; signatures made with the old one stop verifying.
 */
@Controller('api/webhooks/default/secret')
@RequiresScope('queue')
export class WebhooksController {
  constructor(private readonly generations: GenerationQueue) {}

  @Get()
  secret(@CurrentCaller() caller: Caller, @Query('namespace') namespace: unknown) {
    return this.generations.webhookSecret(caller, namespace);
  }

  @Post('rotate')
  @HttpCode(200)
  rotate(@CurrentCaller() caller: Caller, @Query('namespace') namespace: unknown) {
    return this.generations.webhookSecret(caller, namespace, true);
  }
}
