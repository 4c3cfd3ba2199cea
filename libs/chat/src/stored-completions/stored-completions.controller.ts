import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CountsAsWork, CurrentCaller, type Caller, RequiresScope } from '@atelier/auth';
import { ExportCompletions } from './export-completions.use-case';
import { invalid } from '../chat-request';
import { FeedbackService } from './feedback.service';
import { metadataFilter, StoredCompletions } from './stored-completions.service';
import { listPage } from '../list-page';

function optionalString(query: Record<string, unknown>, field: string): string | undefined {
  const v = query[field];
  if (v !== undefined && (typeof v !== 'string' || v.includes('\0'))) throw invalid([{ field, message: `${field} must be given once, as a string (without NUL)` }]);
  return v;
}

/**
 * OpenAI's Stored Completions API (GET/POST/DELETE /api/ai/chat/completions[/{id}[/messages]]);
 * POST /api/ai/chat/completions itself (creating one) is ChatController's.
 */
@Controller('api/ai/chat/completions')
@RequiresScope('chat')
export class StoredCompletionsController {
  constructor(
    private readonly completions: StoredCompletions,
    private readonly exports: ExportCompletions,
  ) {}

  /** It writes a repo: the key needs the repos scope (and chat, checked by the use case). */
  @Post('export')
  @RequiresScope('repos')
  @CountsAsWork()
  @HttpCode(200)
  async export(@CurrentCaller() caller: Caller, @Body() body: unknown, @Req() req: FastifyRequest, @Res({ passthrough: true }) reply: FastifyReply) {
    const done = await this.exports.run(caller, body, String(req.id));
    // Queued: 202 with the export to follow (GET .../exports/{id}, or its export.status event).
    if (done.queued) void reply.status(202);
    return done.body;
  }

  @Get('exports/:id')
  exported(@CurrentCaller() caller: Caller, @Param('id') id: string) {
    return this.exports.get(caller, id);
  }

  @Get()
  list(@CurrentCaller() caller: Caller, @Query() query: Record<string, unknown>) {
    const minValue = optionalString(query, 'min_value');
    const metric = optionalString(query, 'metric');
    if (minValue !== undefined && (metric === undefined || !Number.isFinite(Number(minValue)) || minValue.trim() === ''))
      throw invalid([{ field: 'min_value', message: 'min_value must be a number, and needs metric' }]);
    return this.completions.list(caller, {
      namespace: optionalString(query, 'namespace'),
      model: optionalString(query, 'model'),
      metadata: metadataFilter(query),
      metric,
      minValue: minValue === undefined ? undefined : Number(minValue),
      page: listPage(query, 'asc', 'an id'),
    });
  }

  @Get(':id')
  get(@CurrentCaller() caller: Caller, @Param('id') id: string) {
    return this.completions.get(caller, id);
  }

  @Get(':id/messages')
  messages(@CurrentCaller() caller: Caller, @Param('id') id: string, @Query() query: Record<string, unknown>) {
    return this.completions.messages(caller, id, listPage(query, 'asc', 'an id'));
  }

  @Post(':id')
  @HttpCode(200)
  update(@CurrentCaller() caller: Caller, @Param('id') id: string, @Body() body: unknown) {
    return this.completions.update(caller, id, body);
  }

  @Delete(':id')
  delete(@CurrentCaller() caller: Caller, @Param('id') id: string) {
    return this.completions.delete(caller, id);
  }
}

/** POST /api/ai/feedback (a judgement of a stored completion or response) and GET ?target_id= (a target's feedback). */
@Controller('api/ai/feedback')
@RequiresScope('chat')
export class FeedbackController {
  constructor(private readonly feedback: FeedbackService) {}

  @Post()
  @HttpCode(200)
  give(@CurrentCaller() caller: Caller, @Body() body: unknown) {
    return this.feedback.give(caller, body);
  }

  @Get()
  list(@CurrentCaller() caller: Caller, @Query('target_id') targetId: unknown) {
    return this.feedback.on(caller, targetId);
  }
}

/** POST /api/feedback_metrics (declare one in a namespace) and GET (a namespace's). */
@Controller('api/feedback_metrics')
@RequiresScope('chat')
export class FeedbackMetricsController {
  constructor(private readonly feedback: FeedbackService) {}

  @Post()
  @HttpCode(201)
  create(@CurrentCaller() caller: Caller, @Body() body: unknown) {
    return this.feedback.createMetric(caller, body);
  }

  @Get()
  list(@CurrentCaller() caller: Caller, @Query('namespace') namespace: unknown) {
    if (namespace !== undefined && (typeof namespace !== 'string' || namespace.includes('\0'))) throw invalid([{ field: 'namespace', message: 'namespace must be given once, as a string' }]);
    return this.feedback.metrics(caller, namespace);
  }
}
