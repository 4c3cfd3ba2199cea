import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { createService } from '@atelier/runtime';
import { createTestEnvironment, TestHttp, type TestEnvironment } from '@atelier/testing';
import { GatewayModule } from './gateway.module';

export interface GatewayHarness {
  env: TestEnvironment;
  app: NestFastifyApplication;
  http: TestHttp;
  adminToken: string;
  /** Another gateway replica on the same Postgres/Redis. */
  replica(): Promise<{ app: NestFastifyApplication; http: TestHttp }>;
  close(): Promise<void>;
}

/** A real gateway on a fresh database and Redis prefix, driven through Fastify inject. */
export async function startGateway(overrides: Record<string, string> = {}): Promise<GatewayHarness> {
  const env = await createTestEnvironment(overrides);
  const apps: NestFastifyApplication[] = [];
  const boot = async () => {
    const app = await createService(GatewayModule.forRoot(env.config), env.config, { service: 'gateway' });
    apps.push(app);
    return { app, http: new TestHttp(app) };
  };
  const main = await boot();
  return {
    env,
    ...main,
    adminToken: env.config.ADMIN_TOKEN ?? '',
    replica: boot,
    close: async () => {
      for (const app of apps.reverse()) await app.close();
      await env.cleanup();
    },
  };
}
