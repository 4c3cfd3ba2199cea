import { Controller, Get, Inject, Injectable, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { HealthResponse } from '@atelier/contracts';
import { PrismaService } from '@atelier/db';
import { PublicRoute } from './access-metadata';
import { errorSummary } from './backing-service-fault';
import { RedisService } from './redis.module';

export const SERVICE_NAME = Symbol('SERVICE_NAME');

type Check = () => Promise<void>;

/** Dependencies an app is healthy only with; apps may register more (e.g. storage). */
@Injectable()
export class HealthChecks {
  private readonly checks = new Map<string, Check>();

  constructor(prisma: PrismaService, redis: RedisService) {
    this.register('postgres', () => prisma.ping());
    this.register('redis', () => redis.ping());
  }

  register(name: string, check: Check): void {
    this.checks.set(name, check);
  }

  async run(timeoutMs = 2000): Promise<HealthResponse['checks']> {
    const entries = await Promise.all(
      [...this.checks].map(async ([name, check]) => {
        const started = performance.now();
        try {
          await Promise.race([
            check(),
            new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs).unref()),
          ]);
          return [name, { status: 'up' as const, latency_ms: Math.round(performance.now() - started) }] as const;
        } catch (err) {
          return [name, { status: 'down' as const, error: errorSummary(err) }] as const;
        }
      }),
    );
    return Object.fromEntries(entries);
  }
}

@PublicRoute()
@Controller()
export class HealthController {
  constructor(
    private readonly checks: HealthChecks,
    @Inject(SERVICE_NAME) private readonly service: string,
  ) {}

  /** 200 only when every dependency answers; Kubernetes probes and `npm start` rely on this. */
  @Get('health')
  async health(@Res() reply: FastifyReply): Promise<void> {
    const checks = await this.checks.run();
    const ok = Object.values(checks).every((c) => c.status === 'up');
    const body: HealthResponse = { status: ok ? 'ok' : 'error', service: this.service, checks };
    await reply.status(ok ? 200 : 503).send(body);
  }
}

/**
 * Liveness: the process answers. Deliberately not checking Postgres or Redis: an outage of a
 * dependency must take pods out of rotation (readiness, /health), not restart every pod.
 */
@PublicRoute()
@Controller()
export class LivenessController {
  constructor(@Inject(SERVICE_NAME) private readonly service: string) {}

  @Get('health/live')
  live() {
    return { status: 'ok', service: this.service };
  }
}
