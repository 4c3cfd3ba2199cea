import { Injectable } from '@nestjs/common';
import { Prisma, PrismaService, SqlPool } from '@atelier/db';
import type { FineTuneState } from './fine-tune-states';

export type FineTuneRow = Prisma.FineTuneGetPayload<object>;
export type FineTuneWithNamespace = Prisma.FineTuneGetPayload<{ include: { namespace: true } }>;
/** A transaction the fine-tune repositories share: a use case that spans them (a run's end and its lease) passes it to each. */
export type FineTuneTx = Prisma.TransactionClient;
export type FineTuneChanges = Prisma.FineTuneUpdateManyMutationInput;

/** An unpublished fine_tune.status event of the outbox. */
export interface FineTuneEventRow {
  id: bigint;
  user_id: string;
  data: Record<string, unknown>;
  webhook_url: string | null;
  webhook_id: string | null;
}

/** The fine-tune row `f` as ONE json value (node-postgres then reads one column, not thirteen). */
const FINE_TUNE_JSON = `json_build_object('id', f.id, 'name', f.name, 'resource', f.resource, 'base_model', f.base_model,
  'script_type', f.script_type, 'training_params', f.training_params, 'status', f.state, 'error', f.error_message,
  'tokenization', f.tokenization, 'credits_used', trim_scale(f.credits_used)::text, 'trained_tokens', f.trained_tokens,
  'trained_steps', f.trained_steps, 'attempt', f.attempt, 'run_requested', f.run_requested,
  'stop_requested', f.stop_requested_at IS NOT NULL, 'enqueued_at', floor(extract(epoch FROM f.enqueued_at))::bigint,
  'started_at', floor(extract(epoch FROM f.started_at))::bigint, 'finished_at', floor(extract(epoch FROM f.finished_at))::bigint,
  'created_at', floor(extract(epoch FROM f.created_at))::bigint,
  'updated_at', floor(extract(epoch FROM f.updated_at))::bigint)`;

/**
 * A fine-tune by its repository's namespace and name, and its id: the repository's name (no row
 * when there is no such repository) and the fine-tune (null when that repository has none with
 * this id). Clients poll this while a fine-tune tokenizes; as two Prisma reads (repository, then
 * fine-tune) a poll cost the gateway 0.51 ms of CPU, against 0.14 now (bench:gateway).
 */
const READ_FINE_TUNE = {
  name: 'atelier_read_fine_tune_v2',
  text: `
    SELECT r.name AS repo, CASE WHEN f.id IS NULL THEN NULL ELSE ${FINE_TUNE_JSON} END AS row
    FROM repositories r LEFT JOIN fine_tunes f ON f.repository_id = r.id AND f.id = $3::uuid
    WHERE r.namespace_id = $1::uuid AND r.name = $2`,
};

/**
 * A repository's fine-tunes, newest first, with their count, in one statement (no row when there
 * is no such repository). With and without the status filter are two prepared statements, so
 * each keeps a plan that uses its index.
 */
function listStatement(byStatus: boolean) {
  const matching = `FROM fine_tunes f WHERE f.repository_id = r.id${byStatus ? ' AND f.state = $3' : ''}`;
  const [limit, offset] = byStatus ? ['$4', '$5'] : ['$3', '$4'];
  return {
    name: byStatus ? 'atelier_list_fine_tunes_by_status_v2' : 'atelier_list_fine_tunes_v2',
    // json_agg keeps the page's order only when told: its input order is not the subquery's.
    text: `SELECT r.name AS repo, (SELECT count(*)::int ${matching}) AS total,
    coalesce((SELECT json_agg(p.row ORDER BY p.created_at DESC, p.id DESC) FROM (
      SELECT ${FINE_TUNE_JSON} AS row, f.created_at, f.id ${matching}
      ORDER BY f.created_at DESC, f.id DESC LIMIT ${limit} OFFSET ${offset}) p), '[]') AS rows
    FROM repositories r WHERE r.namespace_id = $1::uuid AND r.name = $2`,
  };
}

const LIST_FINE_TUNES = listStatement(false);
const LIST_FINE_TUNES_BY_STATUS = listStatement(true);

/**
 * The fine_tunes rows, their outbox of status events, logs, checkpoints and deployed models, as the
 * fine-tune use cases read and move them. Methods taking `tx` run inside the caller's transaction
 * (inTransaction); the others on their own.
 */
@Injectable()
export class FineTunesRepository {
  constructor(
    private readonly prisma: PrismaService,
    /** The hot reads (READ_FINE_TUNE, the list statements) run on the process's plain pg pool. */
    private readonly sql: SqlPool,
  ) {}

  inTransaction<T>(work: (tx: FineTuneTx) => Promise<T>): Promise<T> {
    return this.prisma.$transaction(work);
  }

  /** The repository's fine-tune with this id (a uuid). */
  inRepository(repositoryId: string, id: string): Promise<FineTuneRow | null> {
    return this.prisma.fineTune.findFirst({ where: { id, repositoryId } });
  }

  byId(id: string, tx: FineTuneTx = this.prisma): Promise<FineTuneRow | null> {
    return tx.fineTune.findUnique({ where: { id } });
  }

  byIdWithNamespace(id: string): Promise<FineTuneWithNamespace | null> {
    return this.prisma.fineTune.findUnique({ where: { id }, include: { namespace: true } });
  }

  byIdWithRepository(id: string) {
    return this.prisma.fineTune.findUnique({ where: { id }, include: { repository: { include: { namespace: true } } } });
  }

  create(data: Prisma.FineTuneUncheckedCreateInput): Promise<FineTuneRow> {
    return this.prisma.fineTune.create({ data });
  }

  /** READ_FINE_TUNE (`Json`: the public object's own fields, times in Unix seconds): the repository's name (undefined: no such repository) and the fine-tune (null: none with this id). */
  async readJson<Json>(namespaceId: string, repoName: string, id: string | null): Promise<{ repo: string; row: Json | null } | undefined> {
    const { rows } = await this.sql.query<{ repo: string; row: Json | null }>({ ...READ_FINE_TUNE, values: [namespaceId, repoName, id] });
    return rows[0];
  }

  /** A repository's fine-tunes, newest first, one page and the count (undefined: no such repository). */
  async listJson<Json>(namespaceId: string, repoName: string, status: string | undefined, limit: number, offset: number): Promise<{ repo: string; total: number; rows: Json[] } | undefined> {
    const statement = status ? { ...LIST_FINE_TUNES_BY_STATUS, values: [namespaceId, repoName, status, limit, offset] } : { ...LIST_FINE_TUNES, values: [namespaceId, repoName, limit, offset] };
    const { rows } = await this.sql.query<{ repo: string; total: number; rows: Json[] }>(statement);
    return rows[0];
  }

  /** A namespace's fine-tunes as the listing filters them, with the total matching and their repositories' names. */
  listInNamespace(query: { where: Prisma.FineTuneWhereInput; orderBy: Prisma.FineTuneOrderByWithRelationInput[]; skip: number; take: number }) {
    return Promise.all([
      this.prisma.fineTune.count({ where: query.where }),
      this.prisma.fineTune.findMany({ ...query, include: { repository: { select: { name: true } } } }),
    ]);
  }

  async userId(username: string): Promise<string | undefined> {
    return (await this.prisma.user.findUnique({ where: { username }, select: { id: true } }))?.id;
  }

  /** Deletes it unless it is in one of `states`; whether it did. */
  async deleteUnlessIn(id: string, states: readonly FineTuneState[]): Promise<boolean> {
    return (await this.prisma.fineTune.deleteMany({ where: { id, state: { notIn: [...states] } } })).count > 0;
  }

  /** Applies `data` if it is in one of `states` (and in `repositoryId`, when given); whether it was. */
  async updateInStates(id: string, states: readonly FineTuneState[], data: FineTuneChanges, tx: FineTuneTx = this.prisma, repositoryId?: string): Promise<boolean> {
    return (await tx.fineTune.updateMany({ where: { id, state: { in: [...states] }, ...(repositoryId && { repositoryId }) }, data })).count > 0;
  }

  update(tx: FineTuneTx, id: string, data: Prisma.FineTuneUpdateInput): Promise<FineTuneRow> {
    return tx.fineTune.update({ where: { id }, data });
  }

  /** Locks it for `tx` if it is in one of `from` (and, with skipIfLeased, no trainer holds an active lease on it); whether it did. */
  async lockInStates(tx: FineTuneTx, id: string, from: readonly FineTuneState[], skipIfLeased = false): Promise<boolean> {
    const rows = await tx.$queryRaw<{ id: string }[]>`
      SELECT id::text FROM fine_tunes WHERE id = ${id}::uuid AND state = ANY(${[...from]}::text[])
      ${skipIfLeased ? Prisma.sql`AND NOT EXISTS (SELECT 1 FROM fine_tune_leases l WHERE l.fine_tune_id = fine_tunes.id AND l.state = 'active')` : Prisma.empty}
      FOR UPDATE`;
    return rows.length > 0;
  }

  /** What the reservation holds (undefined: it is gone). */
  async reservationAmount(tx: FineTuneTx, reservationId: string): Promise<string | undefined> {
    return (await tx.creditReservation.findUnique({ where: { id: reservationId }, select: { amount: true } }))?.amount.toString();
  }

  /** The names of the fine-tune's repository and namespace. */
  async repositoryNames(tx: FineTuneTx, repositoryId: string): Promise<{ repo: string; namespace: string } | undefined> {
    const repo = await tx.repository.findUnique({ where: { id: repositoryId }, select: { name: true, namespace: { select: { name: true } } } });
    return repo ? { repo: repo.name, namespace: repo.namespace.name } : undefined;
  }

  /** A status event, recorded in the transaction of the change it reports (the outbox). */
  async recordEvent(tx: FineTuneTx, event: { fineTuneId: string; userId: string; data: Prisma.InputJsonValue; webhookUrl: string | null; webhookId: string | null }): Promise<void> {
    await tx.fineTuneEvent.create({ data: event });
  }

  /**
   * Hands the fine-tune's unpublished events to `publish` in order, each marked published once
   * `publish` returns; rows are claimed with SKIP LOCKED, so two publishers never take the same one.
   */
  async publishEvents(fineTuneId: string, publish: (row: FineTuneEventRow) => Promise<void>): Promise<void> {
    await this.prisma.$transaction(async (tx) => {
      const rows = await tx.$queryRaw<FineTuneEventRow[]>`
        SELECT id, user_id::text, data, webhook_url, webhook_id FROM fine_tune_events
        WHERE fine_tune_id = ${fineTuneId}::uuid AND published_at IS NULL ORDER BY id FOR UPDATE SKIP LOCKED`;
      for (const row of rows) {
        await publish(row);
        await tx.$executeRaw`UPDATE fine_tune_events SET published_at = now() WHERE id = ${row.id}`;
      }
    });
  }

  /** Fine-tunes with events unpublished for longer than `olderThanMs`. */
  async withStrandedEvents(olderThanMs: number, limit: number): Promise<string[]> {
    const rows = await this.prisma.$queryRaw<{ fine_tune_id: string }[]>`
      SELECT DISTINCT fine_tune_id::text FROM fine_tune_events
      WHERE published_at IS NULL AND created_at < now() - (${olderThanMs}::int * interval '1 millisecond') LIMIT ${limit}`;
    return rows.map((r) => r.fine_tune_id);
  }

  async namespaceIdOf(id: string): Promise<string | undefined> {
    return (await this.prisma.fineTune.findUnique({ where: { id }, select: { namespaceId: true } }))?.namespaceId;
  }

  /** Of these reservations, those an enqueued or running fine-tune holds. */
  async reservationsInUse(ids: string[]): Promise<Set<string>> {
    const rows = await this.prisma.$queryRaw<{ id: string }[]>`
      SELECT reservation_id::text AS id FROM fine_tunes WHERE reservation_id = ANY(${ids}::uuid[]) AND state IN ('enqueued', 'running')`;
    return new Set(rows.map((r) => r.id));
  }

  /** Tokenized fine-tunes whose run was asked for and that have not moved since `before`. */
  async waitingToRun(before: Date, limit: number): Promise<string[]> {
    const rows = await this.prisma.fineTune.findMany({ where: { state: 'tokenized', runRequested: true, updatedAt: { lt: before } }, select: { id: true }, take: limit });
    return rows.map((r) => r.id);
  }

  /** Of these paths, those on the repository's branch. */
  async existingPaths(repositoryId: string, branch: string, paths: string[]): Promise<Set<string>> {
    const found = await this.prisma.repositoryFile.findMany({ where: { repositoryId, branch, path: { in: paths } }, select: { path: true } });
    return new Set(found.map((f) => f.path));
  }

  /** The run's logs after `after` (an id), in order. */
  logs(fineTuneId: string, after: number, type: string | undefined, limit: number) {
    return this.prisma.fineTuneLog.findMany({ where: { fineTuneId, id: { gt: BigInt(after) }, ...(type && { type }) }, orderBy: { id: 'asc' }, take: limit });
  }

  /** The latest log of this type. */
  lastLog(fineTuneId: string, type: string) {
    return this.prisma.fineTuneLog.findFirst({ where: { fineTuneId, type }, orderBy: { id: 'desc' } });
  }

  /** The latest lease, with its trainer's name. */
  lastLease(fineTuneId: string) {
    return this.prisma.fineTuneLease.findFirst({ where: { fineTuneId }, orderBy: { createdAt: 'desc' }, include: { trainer: { select: { name: true } } } });
  }

  /** Sealed checkpoints by step, the files uploaded for each step, and the models deployed from them. */
  checkpoints(fineTuneId: string) {
    return Promise.all([
      this.prisma.fineTuneCheckpoint.findMany({ where: { fineTuneId }, orderBy: { step: 'asc' } }),
      this.prisma.fineTuneCheckpointFile.findMany({ where: { fineTuneId }, select: { step: true, path: true } }),
      this.prisma.deployedModel.findMany({ where: { fineTuneId } }),
    ]);
  }

  checkpoint(fineTuneId: string, step: number) {
    return this.prisma.fineTuneCheckpoint.findUnique({ where: { fineTuneId_step: { fineTuneId, step } } });
  }

  deployedModel(fineTuneId: string, step: number) {
    return this.prisma.deployedModel.findUnique({ where: { fineTuneId_step: { fineTuneId, step } } });
  }

  /**
   * The deployed model row of a checkpoint, made `deploying` or (already there) given the new
   * deployment type; undefined when another model of the namespace already has the name.
   */
  async upsertDeployedModel(row: { namespaceId: string; name: string; fineTuneId: string; step: number; baseModel: string; deploymentType: string }): Promise<{ id: string } | undefined> {
    try {
      return await this.prisma.deployedModel.upsert({
        where: { fineTuneId_step: { fineTuneId: row.fineTuneId, step: row.step } },
        create: { ...row, status: 'deploying' },
        update: { deploymentType: row.deploymentType },
        select: { id: true },
      });
    } catch (err) {
      if (err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2002') return undefined;
      throw err;
    }
  }

  async setDeployedModelStatus(id: string, status: string): Promise<void> {
    await this.prisma.deployedModel.update({ where: { id }, data: { status } });
  }
}
