import { Inject, Injectable, type OnModuleDestroy } from '@nestjs/common';
import { PrismaPg } from '@prisma/adapter-pg';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { PrismaClient } from './generated/prisma/client';
import { warmPoolSettings } from './pg-pool';

/**
 * Honours Prisma's `?schema=` convention: the schema is used for generated queries and as
 * search_path, so raw SQL (credit reservations) hits the same tables.
 */
export function pgAdapter(databaseUrl: string, poolSize = 10): PrismaPg {
  const url = new URL(databaseUrl);
  const schema = url.searchParams.get('schema') ?? undefined;
  url.searchParams.delete('schema');
  return new PrismaPg(
    {
      connectionString: url.toString(),
      max: poolSize,
      ...warmPoolSettings(poolSize),
      ...(schema ? { options: `-c search_path="${schema.replace(/"/g, '')}"` } : {}),
    },
    schema ? { schema } : undefined,
  );
}

export function createPrismaClient(databaseUrl: string, poolSize = 10): PrismaClient {
  return new PrismaClient({ adapter: pgAdapter(databaseUrl, poolSize) });
}

@Injectable()
export class PrismaService extends PrismaClient implements OnModuleDestroy {
  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    // A burst queues for a connection (DATABASE_TX_MAX_WAIT_MS) rather than failing at Prisma's 2 s;
    // past that it is overload, answered 503 with Retry-After.
    super({ adapter: pgAdapter(config.DATABASE_URL, config.DATABASE_POOL_SIZE), transactionOptions: { maxWait: config.DATABASE_TX_MAX_WAIT_MS } });
  }

  async ping(): Promise<void> {
    await this.$queryRaw`SELECT 1`;
  }

  async onModuleDestroy(): Promise<void> {
    await this.$disconnect();
  }
}
