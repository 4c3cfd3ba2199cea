import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put, Req, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AdminRoute, PublicRoute } from '@atelier/auth';
import { abortWhenGone } from '@atelier/runtime';
import { TrainerLeases } from './trainer-leases.service';
import { CurrentTrainer, TrainerGuard, Trainers, type TrainerIdentity } from './trainers.service';

type WildcardRequest = FastifyRequest<{ Params: { '*': string } }>;

/** The trainer protocol (README, "The trainer protocol"): trainer tokens only, never API keys. */
@PublicRoute()
@UseGuards(TrainerGuard)
@Controller('api/trainer')
export class TrainerController {
  constructor(private readonly leases: TrainerLeases) {}

  @Post('lease')
  async lease(@CurrentTrainer() trainer: TrainerIdentity, @Body() body: unknown, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    // A long-poll ends early when the trainer hangs up (the response closes before it was sent).
    const gone = abortWhenGone(req, reply);
    try {
      const leased = await this.leases.lease(trainer, body ?? {}, gone.signal);
      if (!leased) await reply.status(204).send();
      else await reply.status(200).send(leased);
    } finally {
      gone.release();
    }
  }

  @Post('leases/:lease/events')
  @HttpCode(200)
  events(@CurrentTrainer() trainer: TrainerIdentity, @Param('lease') lease: string, @Body() body: unknown) {
    return this.leases.events(trainer, lease, body);
  }

  @Put('leases/:lease/checkpoints/:step/files/*')
  @HttpCode(201)
  upload(@CurrentTrainer() trainer: TrainerIdentity, @Param('lease') lease: string, @Param('step') step: string, @Req() req: WildcardRequest) {
    return this.leases.upload(trainer, lease, step, req.params['*'] ?? '', req.body);
  }

  @Post('leases/:lease/complete')
  @HttpCode(200)
  complete(@CurrentTrainer() trainer: TrainerIdentity, @Param('lease') lease: string, @Body() body: unknown) {
    return this.leases.complete(trainer, lease, body);
  }

  @Post('leases/:lease/fail')
  @HttpCode(200)
  fail(@CurrentTrainer() trainer: TrainerIdentity, @Param('lease') lease: string, @Body() body: unknown) {
    return this.leases.fail(trainer, lease, body);
  }
}

/** The operator's trainers: a token per trainer process, revocable. */
@AdminRoute()
@Controller('api/admin/trainers')
export class TrainersAdminController {
  constructor(private readonly trainers: Trainers) {}

  @Post()
  @HttpCode(201)
  create(@Body() body: unknown) {
    return this.trainers.create(body);
  }

  @Get()
  list() {
    return this.trainers.list();
  }

  @Delete(':id')
  revoke(@Param('id') id: string) {
    return this.trainers.revoke(id);
  }
}
