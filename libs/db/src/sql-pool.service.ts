import { Inject, Injectable, type OnModuleDestroy } from '@nestjs/common';
import type { Pool, QueryConfig, QueryResult, QueryResultRow } from 'pg';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { createPgPool } from './pg-pool';

/** Connections of the process's one plain pool: hot reads and writes are short, and Prisma has its own pool. */
const SQL_POOL_SIZE = 4;

/**
 * The process's one node-postgres pool, for the statements repositories run without Prisma where
 * Prisma's per-query CPU matters (about twice pg's for a raw query): generation rows and reads,
 * fine-tune reads, idempotency records. Opened on first use, so a process that never runs one holds
 * no connection. Only the credit ledger keeps pools of its own (libs/billing says why: their
 * sessions differ in `synchronous_commit`).
 */
@Injectable()
export class SqlPool implements OnModuleDestroy {
  private pool?: Pool;

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  query<R extends QueryResultRow = QueryResultRow>(statement: QueryConfig): Promise<QueryResult<R>> {
    this.pool ??= createPgPool(this.config.DATABASE_URL, SQL_POOL_SIZE, 'atelier-sql');
    return this.pool.query<R>(statement);
  }

  async onModuleDestroy(): Promise<void> {
    await this.pool?.end();
    this.pool = undefined;
  }
}
