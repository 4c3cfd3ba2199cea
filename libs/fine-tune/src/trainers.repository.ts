import { Injectable } from '@nestjs/common';
import { Prisma, PrismaService } from '@atelier/db';
import type { FineTuneRow, FineTuneTx } from './fine-tunes.repository';

export type LeaseRow = Prisma.FineTuneLeaseGetPayload<object>;
export type TrainerRow = Prisma.TrainerGetPayload<object>;

/** A lease locked with its run's state, as the trainer's events call reads it. */
export interface LockedLease {
  trainer_id: string;
  state: string;
  last_seq: number;
  attempt: number;
  fine_tune_id: string;
  ft_state: string;
  stop_requested: boolean;
}

/** Trainers, their leases on runs, and the checkpoints and logs a lease reports. */
@Injectable()
export class TrainersRepository {
  constructor(private readonly prisma: PrismaService) {}

  /** The namespaces of these names that exist. */
  namespacesNamed(names: string[]): Promise<{ id: string; name: string }[]> {
    return this.prisma.namespace.findMany({ where: { name: { in: names } }, select: { id: true, name: true } });
  }

  /** Names of these namespaces, by id. */
  async namespaceNames(ids: string[]): Promise<Map<string, string>> {
    if (ids.length === 0) return new Map();
    const rows = await this.prisma.namespace.findMany({ where: { id: { in: ids } }, select: { id: true, name: true } });
    return new Map(rows.map((n) => [n.id, n.name]));
  }

  create(data: { name: string; baseModels: string[]; namespaceIds?: string[]; builtin?: boolean; tokenHash: string }): Promise<TrainerRow> {
    return this.prisma.trainer.create({ data });
  }

  /** Trainers not revoked, oldest first. */
  active(): Promise<TrainerRow[]> {
    return this.prisma.trainer.findMany({ where: { revokedAt: null }, orderBy: { createdAt: 'asc' } });
  }

  /** Revokes it (a built-in one only, with `builtinOnly`); whether it was live. */
  async revoke(id: string, builtinOnly = false): Promise<boolean> {
    return (await this.prisma.trainer.updateMany({ where: { id, revokedAt: null, ...(builtinOnly && { builtin: true }) }, data: { revokedAt: new Date() } })).count > 0;
  }

  byTokenHash(tokenHash: string): Promise<TrainerRow | null> {
    return this.prisma.trainer.findUnique({ where: { tokenHash } });
  }

  /**
   * The oldest enqueued run this trainer serves (its base models, its namespaces when it has any)
   * that no stop was asked for and no one holds, leased to it: the run's attempt counts up and
   * the lease is made, in one transaction. SKIP LOCKED: two trainers never take the same run.
   */
  claim(trainer: { id: string; baseModels: string[]; namespaceIds: string[] }): Promise<{ lease: LeaseRow; ft: FineTuneRow } | undefined> {
    return this.prisma.$transaction(async (tx) => {
      const [candidate] = await tx.$queryRaw<{ id: string }[]>`
        SELECT f.id::text FROM fine_tunes f
        WHERE f.state = 'enqueued' AND f.base_model = ANY(${trainer.baseModels}::text[]) AND f.stop_requested_at IS NULL
          AND (cardinality(${trainer.namespaceIds}::uuid[]) = 0 OR f.namespace_id = ANY(${trainer.namespaceIds}::uuid[]))
          AND NOT EXISTS (SELECT 1 FROM fine_tune_leases l WHERE l.fine_tune_id = f.id AND l.state = 'active')
        ORDER BY f.enqueued_at, f.id LIMIT 1 FOR UPDATE SKIP LOCKED`;
      if (!candidate) return undefined;
      const ft = await tx.fineTune.update({ where: { id: candidate.id }, data: { attempt: { increment: 1 } } });
      const lease = await tx.fineTuneLease.create({ data: { fineTuneId: ft.id, trainerId: trainer.id, attempt: ft.attempt, activeFor: ft.id } });
      return { lease, ft };
    });
  }

  /** The lease, locked for `tx` (null: no such lease). */
  async lock(tx: FineTuneTx, leaseId: string): Promise<LeaseRow | null> {
    const rows = await tx.$queryRaw<{ id: string }[]>`SELECT id::text FROM fine_tune_leases WHERE id = ${leaseId}::uuid FOR UPDATE`;
    return rows.length ? tx.fineTuneLease.findUnique({ where: { id: leaseId } }) : null;
  }

  /** The lease locked for `tx` with its run's state, in one statement. */
  async lockWithRun(tx: FineTuneTx, leaseId: string): Promise<LockedLease | undefined> {
    const [row] = await tx.$queryRaw<LockedLease[]>`
      SELECT l.trainer_id::text, l.state, l.last_seq, l.attempt, l.fine_tune_id::text, f.state AS ft_state, f.stop_requested_at IS NOT NULL AS stop_requested
      FROM fine_tune_leases l JOIN fine_tunes f ON f.id = l.fine_tune_id
      WHERE l.id = ${leaseId}::uuid FOR UPDATE OF l`;
    return row;
  }

  /** The lease is finished: its run is free for no one (the run's end follows in the same transaction). */
  async finish(tx: FineTuneTx, leaseId: string): Promise<void> {
    await tx.fineTuneLease.update({ where: { id: leaseId }, data: { state: 'finished', activeFor: null, heartbeatAt: new Date() } });
  }

  /** The trainer's events as the run's logs, and the lease's last seq and heartbeat. */
  async applyEvents(tx: FineTuneTx, leaseId: string, logs: { fineTuneId: string; attempt: number; type: string; data: Prisma.InputJsonValue }[], lastSeq: number): Promise<void> {
    if (logs.length) await tx.fineTuneLog.createMany({ data: logs });
    await tx.$executeRaw`UPDATE fine_tune_leases SET last_seq = ${lastSeq}, heartbeat_at = now() WHERE id = ${leaseId}::uuid`;
  }

  /** A heartbeat outside the events call (an upload), while the lease is active. */
  async heartbeat(leaseId: string): Promise<void> {
    await this.prisma.fineTuneLease.updateMany({ where: { id: leaseId, state: 'active' }, data: { heartbeatAt: new Date() } });
  }

  /** Leases silent since `lostAfterMs` become lost; their runs and attempts. */
  async markLost(lostAfterMs: number): Promise<{ fine_tune_id: string; attempt: number }[]> {
    return this.prisma.$queryRaw<{ fine_tune_id: string; attempt: number }[]>`
      UPDATE fine_tune_leases SET state = 'lost', active_for = NULL
      WHERE state = 'active' AND heartbeat_at < now() - (${lostAfterMs}::int * interval '1 millisecond')
      RETURNING fine_tune_id::text, attempt`;
  }

  async checkpointCount(tx: FineTuneTx, fineTuneId: string): Promise<number> {
    return tx.fineTuneCheckpoint.count({ where: { fineTuneId } });
  }

  async checkpointSealed(fineTuneId: string, step: number, tx: FineTuneTx = this.prisma): Promise<boolean> {
    return (await tx.fineTuneCheckpoint.findUnique({ where: { fineTuneId_step: { fineTuneId, step } }, select: { step: true } })) !== null;
  }

  /** The sizes of the files uploaded for the step. */
  async checkpointFileSizes(tx: FineTuneTx, fineTuneId: string, step: number): Promise<bigint[]> {
    return (await tx.fineTuneCheckpointFile.findMany({ where: { fineTuneId, step }, select: { sizeBytes: true } })).map((f) => f.sizeBytes);
  }

  /** Seals the step (sealed already: unchanged). */
  async seal(tx: FineTuneTx, checkpoint: { fineTuneId: string; step: number; metrics: Prisma.InputJsonValue; sizeBytes: bigint }): Promise<void> {
    await tx.fineTuneCheckpoint.upsert({ where: { fineTuneId_step: { fineTuneId: checkpoint.fineTuneId, step: checkpoint.step } }, create: checkpoint, update: {} });
  }

  async saveCheckpointFile(file: { fineTuneId: string; step: number; path: string; blobKey: string; sizeBytes: bigint; sha256: string }): Promise<void> {
    const { fineTuneId, step, path, ...data } = file;
    await this.prisma.fineTuneCheckpointFile.upsert({ where: { fineTuneId_step_path: { fineTuneId, step, path } }, create: file, update: data });
  }

  /** The run's last sealed checkpoint and its files (a new lease resumes from it). */
  async lastCheckpoint(fineTuneId: string) {
    const last = await this.prisma.fineTuneCheckpoint.findFirst({ where: { fineTuneId }, orderBy: { step: 'desc' } });
    const files = last ? await this.prisma.fineTuneCheckpointFile.findMany({ where: { fineTuneId, step: last.step }, orderBy: { path: 'asc' } }) : [];
    return last ? { step: last.step, files } : undefined;
  }

  /** The run's repository with its namespace. */
  repositoryOf(repositoryId: string) {
    return this.prisma.repository.findUniqueOrThrow({ where: { id: repositoryId }, include: { namespace: true } });
  }

  /** The file on the branch now (runs tokenized before datasets were pinned read it). */
  fileOnBranch(repositoryId: string, branch: string, path: string) {
    return this.prisma.repositoryFile.findUnique({ where: { repositoryId_branch_path: { repositoryId, branch, path } } });
  }

  /** The run, with its namespace. */
  fineTuneWithNamespace(id: string) {
    return this.prisma.fineTune.findUniqueOrThrow({ where: { id }, include: { namespace: true } });
  }
}
