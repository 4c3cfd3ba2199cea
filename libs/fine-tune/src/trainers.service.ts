import { createParamDecorator, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AuthFailureThrottle, hashApiKey } from '@atelier/auth';
import { ApiError, UUID_PATTERN, type CreatedTrainer, type TrainerView } from '@atelier/contracts';
import { randomToken } from '@atelier/random';
import { BASE_MODELS } from './base-models';
import { TrainersRepository } from './trainers.repository';

export const TRAINER_TOKEN_PREFIX = 'trn_';

/** The built-in trainer's name, and the base models it serves. */
export const BUILTIN_TRAINER_NAME = 'atelier-builtin';
export const BUILTIN_BASE_MODELS = ['atelier/local-chat', 'atelier/local-image'] as const;

export interface TrainerIdentity {
  id: string;
  name: string;
  baseModels: string[];
  /** The namespaces whose runs it may lease; empty: every namespace (the operator's trainer). */
  namespaceIds: string[];
}

const MAX_TRAINER_NAMESPACES = 100;

/** A cached token lookup is trusted this long; a revoke reaches every replica within it. */
const CACHE_MS = 5_000;

/**
 * Trainer tokens: made by the operator (POST /api/admin/trainers), stored as a SHA-256 hash, good
 * only on the /api/trainer routes, revoked by DELETE. A trainer made with `namespaces` is a team's:
 * it leases only those namespaces' runs. The built-in trainer of each fine-tune service process
 * gets a random token of its own, stored the same way and revoked when the process stops: nothing
 * derives it, so no other secret's leak hands out the tenants' runs.
 */
@Injectable()
export class Trainers {
  private readonly cache = new Map<string, { trainer: TrainerIdentity | undefined; at: number }>();

  constructor(private readonly rows: TrainersRepository) {}

  async create(body: unknown): Promise<CreatedTrainer> {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw ApiError.badRequest('Request body must be a JSON object');
    const { name, base_models: models, namespaces } = body as Record<string, unknown>;
    if (typeof name !== 'string' || name.trim() === '' || name.length > 100 || name.includes('\u0000'))
      throw ApiError.badRequest('name must be a non-empty string of at most 100 characters, without NUL');
    if (!Array.isArray(models) || models.length === 0 || models.some((m) => typeof m !== 'string'))
      throw ApiError.badRequest('base_models must be a non-empty array of base model names (GET /api/fine_tunes/base_models)');
    const unknown = (models as string[]).filter((m) => !Object.hasOwn(BASE_MODELS, m));
    if (unknown.length) throw ApiError.badRequest(`Unknown base model(s): ${unknown.join(', ')}; see GET /api/fine_tunes/base_models`);
    let namespaceIds: string[] = [];
    if (namespaces !== undefined && namespaces !== null) {
      if (!Array.isArray(namespaces) || namespaces.length === 0 || namespaces.length > MAX_TRAINER_NAMESPACES || namespaces.some((n) => typeof n !== 'string' || n === '' || n.length > 200))
        throw ApiError.badRequest(`namespaces must be a non-empty array of at most ${MAX_TRAINER_NAMESPACES} namespace names (omit it for a trainer of every namespace)`);
      const wanted = [...new Set(namespaces as string[])];
      const found = await this.rows.namespacesNamed(wanted);
      const missing = wanted.filter((n) => !found.some((f) => f.name === n));
      if (missing.length) throw ApiError.badRequest(`Unknown namespace(s): ${missing.join(', ')}`);
      namespaceIds = found.map((f) => f.id);
    }
    const token = TRAINER_TOKEN_PREFIX + randomToken(32);
    const row = await this.rows.create({ name: name.trim(), baseModels: [...new Set(models as string[])], namespaceIds, tokenHash: hashApiKey(token) });
    return { ...(await this.views([row]))[0], token };
  }

  async list(): Promise<{ trainers: TrainerView[] }> {
    const rows = await this.rows.active();
    return { trainers: await this.views(rows) };
  }

  /** The trainers as the API shows them, their namespaces by name (one query for all of them). */
  private async views(rows: { id: string; name: string; baseModels: string[]; namespaceIds: string[]; builtin: boolean; createdAt: Date }[]): Promise<TrainerView[]> {
    const ids = [...new Set(rows.flatMap((t) => t.namespaceIds))];
    const names = await this.rows.namespaceNames(ids);
    return rows.map((t) => ({
      id: t.id,
      name: t.name,
      base_models: t.baseModels,
      namespaces: t.namespaceIds.length ? t.namespaceIds.map((id) => names.get(id) ?? id).sort() : null,
      builtin: t.builtin,
      created_at: Math.floor(t.createdAt.getTime() / 1000),
    }));
  }

  async revoke(id: string): Promise<{ id: string; revoked: true }> {
    const revoked = UUID_PATTERN.test(id) && (await this.rows.revoke(id));
    if (!revoked) throw ApiError.notFound(`Trainer not found: ${id}`);
    this.cache.clear();
    return { id, revoked: true };
  }

  async authenticate(authorization: unknown): Promise<TrainerIdentity> {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(String(authorization ?? ''));
    if (!m || !m[1].startsWith(TRAINER_TOKEN_PREFIX)) throw ApiError.unauthorized('Missing trainer token; send "Authorization: Bearer trn_..."');
    const hash = hashApiKey(m[1]);
    const cached = this.cache.get(hash);
    let trainer = cached && Date.now() - cached.at < CACHE_MS ? cached.trainer : undefined;
    if (!cached || Date.now() - cached.at >= CACHE_MS) {
      const row = await this.rows.byTokenHash(hash);
      trainer = row && !row.revokedAt ? { id: row.id, name: row.name, baseModels: row.baseModels, namespaceIds: row.namespaceIds } : undefined;
      if (this.cache.size > 1000) this.cache.clear();
      this.cache.set(hash, { trainer, at: Date.now() });
    }
    if (!trainer) throw ApiError.unauthorized('Invalid or revoked trainer token');
    return trainer;
  }

  /** A fresh built-in trainer for this process: a random token, stored hashed like any trainer's. */
  async createBuiltin(): Promise<{ id: string; token: string }> {
    const token = TRAINER_TOKEN_PREFIX + randomToken(32);
    const row = await this.rows.create({ name: BUILTIN_TRAINER_NAME, baseModels: [...BUILTIN_BASE_MODELS], builtin: true, tokenHash: hashApiKey(token) });
    return { id: row.id, token };
  }

  /** The process stops: its built-in token stops working (a crashed one's is never known to anyone). */
  async revokeBuiltin(id: string): Promise<void> {
    await this.rows.revoke(id, true);
  }
}

type RequestWithTrainer = FastifyRequest & { trainer?: TrainerIdentity };

/** The /api/trainer routes: a trainer token, never an API key (and no API key works there). */
@Injectable()
export class TrainerGuard implements CanActivate {
  constructor(
    private readonly trainers: Trainers,
    private readonly failures: AuthFailureThrottle,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const req = context.switchToHttp().getRequest<RequestWithTrainer>();
    const reply = context.switchToHttp().getResponse<FastifyReply>();
    req.trainer = await this.failures.guard(req.ip, (n, v) => void reply.header(n, v), () => 'trainer token', () => this.trainers.authenticate(req.headers.authorization));
    return true;
  }
}

export const CurrentTrainer = createParamDecorator((_: unknown, ctx: ExecutionContext): TrainerIdentity => {
  const trainer = ctx.switchToHttp().getRequest<RequestWithTrainer>().trainer;
  if (!trainer) throw ApiError.unauthorized('A trainer token is required');
  return trainer;
});
