import 'reflect-metadata';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Module, type DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AccountsModule, AccountsService, ApiKeys } from '@atelier/accounts';
import { ApiKeyAuthenticator, ApiKeysRepository } from '@atelier/auth';
import { loadConfigOrExit, type AppConfig } from '@atelier/config';
import { AdjustCreditsRequest, ApiError, CreateOrgRequest, CreateUserRequest, NamespaceLimitsRequest } from '@atelier/contracts';
import { parseBody, ServiceRuntimeModule } from '@atelier/runtime';

const USAGE = `Usage: npm run admin -- <command> [args]

  create-user <username> [--credits N]          a user, their namespace and a first API key
  create-key <username> [--name N] [--namespace NS] [--scopes chat,images] [--expires-at ISO|UNIX]
             [--rpm N] [--read-rpm N] [--tpm N] [--max-concurrent N] [--budget DECIMAL --budget-period day|month|total]
                                                another API key for a user, with the self-service fields
  revoke-key <prefix>                           revoke a key by its public prefix
  create-org <name> [--members a,b] [--credits N]
  add-member <org> <username>                   add a user to an org
  remove-member <org> <username>                take a user out of an org; their keys bound to it are revoked
  credits <namespace> <amount>                  add (or, negative, remove) credits
  show <namespace>                              credits and reservations of a namespace
  limits <namespace> [--rpm N|none] [--read-rpm N|none] [--tpm N|none] [--max-concurrent N|none]
                                                what all keys billing to a namespace may do together
  demo [--username NAME] [--credits N] [--key-file PATH]
                                                ensure a demo user and print a working key

Output is JSON. Uses DATABASE_URL and REDIS_URL like the services.`;

@Module({})
class AdminCliModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: AdminCliModule,
      imports: [ServiceRuntimeModule.forRoot({ service: 'admin-cli', config }), AccountsModule],
      providers: [ApiKeysRepository, ApiKeyAuthenticator],
    };
  }
}

async function main(): Promise<number> {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: {
      credits: { type: 'string' },
      members: { type: 'string' },
      username: { type: 'string' },
      'key-file': { type: 'string' },
      name: { type: 'string' },
      namespace: { type: 'string' },
      scopes: { type: 'string' },
      'expires-at': { type: 'string' },
      rpm: { type: 'string' },
      'read-rpm': { type: 'string' },
      tpm: { type: 'string' },
      'max-concurrent': { type: 'string' },
      budget: { type: 'string' },
      'budget-period': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, ...args] = positionals;
  if (!command || values.help) {
    process.stdout.write(`${USAGE}\n`);
    return command ? 0 : 1;
  }
  const config = loadConfigOrExit();
  const app = await NestFactory.createApplicationContext(AdminCliModule.forRoot(config), { logger: ['error'] });
  const accounts = app.get(AccountsService);
  const need = (n: number) => {
    if (args.length < n) throw ApiError.badRequest(`${command} needs ${n} argument(s); see --help`);
  };
  try {
    let result: unknown;
    switch (command) {
      case 'create-user': {
        need(1);
        const req = parseBody(CreateUserRequest, { username: args[0], ...(values.credits ? { credits: values.credits } : {}) });
        result = await accounts.createUser(req.username, req.credits);
        break;
      }
      case 'create-key': {
        need(1);
        // The same body the operator API takes; ApiKeys validates it and names a bad field.
        const int = (v: string | undefined) => (v === undefined ? undefined : /^\d+$/.test(v) ? Number(v) : v);
        const limits = { rpm: int(values.rpm), read_rpm: int(values['read-rpm']), tpm: int(values.tpm), max_concurrent: int(values['max-concurrent']) };
        const body = {
          name: values.name,
          namespace: values.namespace,
          scopes: values.scopes?.split(',').map((x) => x.trim()),
          expires_at: values['expires-at'] === undefined ? undefined : int(values['expires-at']),
          limits: Object.values(limits).some((v) => v !== undefined) ? limits : undefined,
          budget: values.budget === undefined && values['budget-period'] === undefined ? undefined : { max_spend: values.budget, period: values['budget-period'] ?? 'total' },
        };
        result = await app.get(ApiKeys).createForUser(args[0], JSON.parse(JSON.stringify(body)));
        break;
      }
      case 'limits': {
        need(1);
        const limit = (v: string | undefined) => (v === undefined ? undefined : v === 'none' ? null : /^\d+$/.test(v) ? Number(v) : v);
        const req = parseBody(NamespaceLimitsRequest, {
          rpm: limit(values.rpm),
          read_rpm: limit(values['read-rpm']),
          tpm: limit(values.tpm),
          max_concurrent: limit(values['max-concurrent']),
        });
        result = await accounts.setLimits(args[0], req);
        break;
      }
      case 'revoke-key':
        need(1);
        result = await accounts.revokeApiKey(args[0]);
        break;
      case 'create-org': {
        need(1);
        const members = values.members ? values.members.split(',').map((m) => m.trim()).filter(Boolean) : [];
        const req = parseBody(CreateOrgRequest, { name: args[0], members, ...(values.credits ? { credits: values.credits } : {}) });
        result = await accounts.createOrg(req.name, req.members, req.credits);
        break;
      }
      case 'add-member':
        need(2);
        result = await accounts.addMember(args[0], args[1]);
        break;
      case 'remove-member':
        need(2);
        result = await accounts.removeMember(args[0], args[1]);
        break;
      case 'credits': {
        need(2);
        const req = parseBody(AdjustCreditsRequest, { amount: args[1] });
        result = await accounts.adjustCredits(args[0], req.amount);
        break;
      }
      case 'show':
        need(1);
        result = await accounts.describeNamespace(args[0]);
        break;
      case 'demo':
        result = await ensureDemoUser(app.get(AccountsService), app.get(ApiKeyAuthenticator), {
          username: values.username ?? config.DEMO_USER,
          credits: values.credits ?? config.DEMO_CREDITS,
          keyFile: values['key-file'],
        });
        break;
      default:
        throw ApiError.badRequest(`Unknown command '${command}'\n\n${USAGE}`);
    }
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return 0;
  } catch (err) {
    if (err instanceof ApiError) {
      process.stderr.write(`Error (${err.type}): ${err.message}\n`);
      return 1;
    }
    throw err;
  } finally {
    await app.close();
  }
}

/**
 * Keys are shown once, so the demo key is kept in a local file (outside git) and reused while
 * it still authenticates; otherwise a new one is issued.
 */
async function ensureDemoUser(
  accounts: AccountsService,
  authenticator: ApiKeyAuthenticator,
  opts: { username: string; credits: string; keyFile?: string },
) {
  const keyFile = opts.keyFile ? path.resolve(opts.keyFile) : undefined;
  if (keyFile && existsSync(keyFile)) {
    const saved = readFileSync(keyFile, 'utf8').trim();
    const caller = await authenticator.authenticate(`Bearer ${saved}`).catch(() => undefined);
    if (caller?.username === opts.username) {
      const ns = await accounts.describeNamespace(caller.namespace);
      return { username: opts.username, namespace: caller.namespace, api_key: saved, credits: ns.credits, created: false };
    }
  }
  let apiKey: string;
  let created = true;
  try {
    apiKey = (await accounts.createUser(opts.username, opts.credits)).api_key;
  } catch (err) {
    if (!(err instanceof ApiError && err.type === 'conflict')) throw err;
    apiKey = (await accounts.createApiKey(opts.username)).api_key;
    created = false;
  }
  if (keyFile) {
    mkdirSync(path.dirname(keyFile), { recursive: true });
    writeFileSync(keyFile, `${apiKey}\n`, { mode: 0o600 });
  }
  const ns = await accounts.describeNamespace(opts.username);
  return { username: opts.username, namespace: opts.username, api_key: apiKey, credits: ns.credits, created };
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    process.stderr.write(`admin failed: ${err.message}\n`);
    process.exit(1);
  },
);
