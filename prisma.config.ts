import { defineConfig } from 'prisma/config';

// The CLI is used offline only for generate/validate/format; migrations are applied by
// tools/db/migrate.mjs (see README). A placeholder URL keeps `prisma generate` working
// where no database is configured.
export default defineConfig({
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
  datasource: { url: process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/atelier' },
});
