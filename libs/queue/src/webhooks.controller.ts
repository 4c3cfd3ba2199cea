import { Controller, Get, HttpCode, Post, Query } from '@nestjs/common';
import { CurrentCaller, type Caller, RequiresScope } from '@atelier/auth';
import { GenerationWebhooks } from './generation-webhooks.use-case';

/**
 * The signing secret of a namespace's webhooks (Standard Webhooks): members of the namespace
 * only. Rotating replaces it at once; signatures made with the old one stop verifying.
 */
@Controller('api/webhooks/default/secret')
@RequiresScope('queue')
export class WebhooksController {
  constructor(private readonly webhooks: GenerationWebhooks) {}

  @Get()
  secret(@CurrentCaller() caller: Caller, @Query('namespace') namespace: unknown) {
    return this.webhooks.secret(caller, namespace);
  }

  @Post('rotate')
  @HttpCode(200)
  rotate(@CurrentCaller() caller: Caller, @Query('namespace') namespace: unknown) {
    return this.webhooks.secret(caller, namespace, true);
  }
}
