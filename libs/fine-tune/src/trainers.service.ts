import { createHmac } from 'node:crypto';
import { createParamDecorator, Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { APP_CONFIG, type AppConfig, DEV_URL_SIGNING_SECRET } from '@atelier/config';
import { hashApiKey } from '@atelier/auth';
import { ApiError, UUID_PATTERN } from '@atelier/contracts';
import { PrismaService } from '@atelier/db';
import { randomToken } from '@atelier/random';
import { BASE_MODELS } from './base-models';

export const TRAINER_TOKEN_PREFIX = 'trn_';

/** The built-in trainer's name, and the base models it serves. */
export const BUILTIN_TRAINER_NAME = 'atelier-builtin';
export const BUILTIN_BASE_MODELS = ['atelier/local-chat', 'atelier/local-image'] as const;

export interface TrainerIdentity {
  id: string;
  name: string;
  baseModels: string[];
}

/** A cached token lookup is trusted this long; a revoke reaches every replica within it. */
const CACHE_MS = 5_000;

/**
 * Trainer tokens: made by the operator (POST /api/admin/trainers), stored as a SHA-256 hash, good
 * only on the /api/trainer routes, revoked by DELETE. The built-in trainer's token is derived from
 * the signing secret, so every replica of the fine-tune service computes the same one.
 */
@Injectable()
export class Trainers {
  private readonly cache = new Map<string, { trainer: TrainerIdentity | undefined; at: number }>();

  constructor(
    private readonly prisma: PrismaService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async create(body: unknown): Promise<{ id: string; name: string; base_models: string[]; token: string; created_at: number }> {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw ApiError.badRequest('Request body must be a JSON object');
    const { name, base_models: models } = body as Record<string, unknown>;
    if (typeof name !== 'string' || name.trim() === '' || name.length > 100 || name.includes('\u0000'))
      throw ApiError.badRequest('name must be a non-empty string of at most 100 characters, without NUL');
    if (!Array.isArray(models) || models.length === 0 || models.some((m) => typeof m !== 'string'))
      throw ApiError.badRequest('base_models must be a non-empty array of base model names (GET /api/fine_tunes/base_models)');
    const unknown = (models as string[]).filter((m) => !Object.hasOwn(BASE_MODELS, m));
    if (unknown.length) throw ApiError.badRequest(`Unknown base model(s): ${unknown.join(', ')}; see GET /api/fine_tunes/base_models`);
    const token = TRAINER_TOKEN_PREFIX + randomToken(32);
    const row = await this.prisma.trainer.create({ data: { name: name.trim(), baseModels: [...new Set(models as string[])], tokenHash: hashApiKey(token) } });
    return { id: row.id, name: row.name, base_models: row.baseModels, token, created_at: Math.floor(row.createdAt.getTime() / 1000) };
  }

  async list() {
    const rows = await this.prisma.trainer.findMany({ where: { revokedAt: null }, orderBy: { createdAt: 'asc' } });
    return { trainers: rows.map((t) => ({ id: t.id, name: t.name, base_models: t.baseModels, created_at: Math.floor(t.createdAt.getTime() / 1000) })) };
  }

  async revoke(id: string): Promise<{ id: string; revoked: true }> {
    const revoked = UUID_PATTERN.test(id) ? await this.prisma.trainer.updateMany({ where: { id, revokedAt: null }, data: { revokedAt: new Date() } }) : { count: 0 };
    if (revoked.count === 0) throw ApiError.notFound(`Trainer not found: ${id}`);
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
      const row = await this.prisma.trainer.findUnique({ where: { tokenHash: hash } });
      trainer = row && !row.revokedAt ? { id: row.id, name: row.name, baseModels: row.baseModels } : undefined;
      if (this.cache.size > 1000) this.cache.clear();
      this.cache.set(hash, { trainer, at: Date.now() });
    }
    if (!trainer) throw ApiError.unauthorized('Invalid or revoked trainer token');
    return trainer;
  }

  /** The built-in trainer's token, the same on every replica; its row is made on first use. */
  builtinToken(): string {
    const secret = this.config.URL_SIGNING_SECRET ?? DEV_URL_SIGNING_SECRET;
    return TRAINER_TOKEN_PREFIX + createHmac('sha256', secret).update('atelier builtin trainer v1').digest('base64url');
  }

  async ensureBuiltin(): Promise<string> {
    const token = this.builtinToken();
    const tokenHash = hashApiKey(token);
    await this.prisma.trainer.upsert({
      where: { tokenHash },
      create: { name: BUILTIN_TRAINER_NAME, baseModels: [...BUILTIN_BASE_MODELS], tokenHash },
      update: { baseModels: [...BUILTIN_BASE_MODELS] },
    });
    return token;
  }
}

type RequestWithTrainer = FastifyRequest & { trainer?: TrainerIdentity };

/** The /api/trainer routes: a trainer token, never an API key (and no API key works there). */
@Injectable()
export class TrainerGuard implements CanActivate {
  constructor(private readonly trainers: Trainers) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const req = context.switchToHttp().getRequest<RequestWithTrainer>();
    req.trainer = await this.trainers.authenticate(req.headers.authorization);
    return true;
  }
}

export const CurrentTrainer = createParamDecorator((_: unknown, ctx: ExecutionContext): TrainerIdentity => {
  const trainer = ctx.switchToHttp().getRequest<RequestWithTrainer>().trainer;
  if (!trainer) throw ApiError.unauthorized('A trainer token is required');
  return trainer;
});
