export { PrismaService, createPrismaClient, pgAdapter } from './prisma.service';
export { DbModule } from './db.module';
export { Prisma, PrismaClient } from './generated/prisma/client';
export * from './generated/prisma/enums';
export type * from './generated/prisma/models';
export { createPgPool } from './pg-pool';
export { SqlPool } from './sql-pool.service';
