#!/usr/bin/env node
// CLI over tools/db/migrations.mjs: an offline stand-in for the Prisma CLI's migrate commands.
//
//   node tools/db/migrate.mjs deploy            apply pending prisma/migrations to DATABASE_URL
//   node tools/db/migrate.mjs status            list applied / pending migrations (exit 1 if not up to date)
//   node tools/db/migrate.mjs create <name>     write prisma/migrations/<UTC ts>_<name>/migration.sql from schema changes
//   node tools/db/migrate.mjs reset --force     drop and recreate the DATABASE_URL schema (dev/test only)
//   node tools/db/migrate.mjs verify            ask Prisma's schema engine whether it accepts the database
//
// DATABASE_URL defaults to postgresql://postgres@127.0.0.1:5432/atelier; `?schema=name` is honoured.

import { createMigration, DEFAULT_DATABASE_URL, deploy, MigrationError, parseDatabaseUrl, reset, status, verify } from './migrations.mjs';

const USAGE = `Usage: node tools/db/migrate.mjs <command>

Commands:
  deploy              Apply all pending migrations (creates the database/schema if needed)
  status              Show applied and pending migrations
  create <name>       Generate a migration from changes to prisma/schema.prisma
  reset --force       Drop and recreate the schema: ALL DATA IS LOST (dev/test only)
  verify              Check the database with Prisma's own schema engine: migration
                      history as \`prisma migrate\` sees it, and drift from schema.prisma

Environment:
  DATABASE_URL        default ${DEFAULT_DATABASE_URL} (supports ?schema=name)
  MIGRATE_LOCK_TIMEOUT_SECONDS  how long deploy waits for a concurrent run (default 600)
  MIGRATE_DEBUG=1     print schema engine logs and stack traces`;

async function main(argv) {
  const [command, ...rest] = argv;
  const flags = new Set(rest.filter((a) => a.startsWith('-')));
  const args = rest.filter((a) => !a.startsWith('-'));
  switch (command) {
    case 'deploy': {
      await deploy();
      return 0;
    }
    case 'status': {
      const s = await status();
      return s.pending.length || s.failed.length || s.edited.length ? 1 : 0;
    }
    case 'create': {
      if (args.length !== 1) {
        console.error('Usage: node tools/db/migrate.mjs create <name>   (e.g. npm run db:migrate:create -- add_widgets)');
        return 2;
      }
      await createMigration({ name: args[0] });
      return 0;
    }
    case 'verify': {
      const v = await verify();
      return v.ok ? 0 : 1;
    }
    case 'reset': {
      if (!flags.has('--force')) {
        const t = parseDatabaseUrl();
        console.error(
          `Refusing to reset without --force: this drops schema "${t.schema}" of ${t.display} with all its data.\n` +
            'Run `node tools/db/migrate.mjs reset --force`, then `node tools/db/migrate.mjs deploy`.',
        );
        return 2;
      }
      await reset();
      console.log('Run `node tools/db/migrate.mjs deploy` to re-apply the migrations.');
      return 0;
    }
    case undefined:
    case 'help':
    case '-h':
    case '--help':
      console.log(USAGE);
      return command === undefined ? 2 : 0;
    default:
      console.error(`Unknown command "${command}".\n\n${USAGE}`);
      return 2;
  }
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (err) {
  if (err instanceof MigrationError && !process.env.MIGRATE_DEBUG) {
    console.error(`Error: ${err.message}`);
  } else {
    console.error(process.env.MIGRATE_DEBUG ? err : `Error: ${err?.message ?? err}\n(set MIGRATE_DEBUG=1 for details)`);
  }
  process.exitCode = 1;
}
