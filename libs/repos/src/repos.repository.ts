import { Injectable } from '@nestjs/common';
import { Prisma, PrismaService } from '@atelier/db';
import { DEFAULT_BRANCH } from './repository-names';
import type { CommitFileView } from './repository-types';

/** A file stored in the blob store, as an upload records it. */
export interface StoredFile {
  path: string;
  key: string;
  size: number;
  sha256: string;
  contentType: string;
}

function isUniqueViolation(err: unknown): boolean {
  return err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2002';
}

/** The repositories, branches, files and commits tables; which path on which branch points at which blob. */
@Injectable()
export class ReposRepository {
  constructor(private readonly prisma: PrismaService) {}

  /** A repository with its default branch; undefined when the namespace has one of that name. */
  async create(namespaceId: string, name: string, description: string | null) {
    try {
      return await this.prisma.repository.create({ data: { namespaceId, name, description, branches: { create: { name: DEFAULT_BRANCH } } } });
    } catch (err) {
      if (isUniqueViolation(err)) return undefined;
      throw err;
    }
  }

  byName(namespaceId: string, name: string) {
    return this.prisma.repository.findUnique({ where: { namespaceId_name: { namespaceId, name } } });
  }

  branches(repositoryId: string) {
    return this.prisma.repositoryBranch.findMany({ where: { repositoryId }, orderBy: { createdAt: 'asc' } });
  }

  branch(repositoryId: string, name: string) {
    return this.prisma.repositoryBranch.findUnique({ where: { repositoryId_name: { repositoryId, name } } });
  }

  /** A new branch holding the same files (and blobs) as `from`, in one transaction; undefined when the name is taken. */
  async createBranch(repositoryId: string, name: string, from: string, headCommitId: string | null) {
    try {
      return await this.prisma.$transaction(async (tx) => {
        const created = await tx.repositoryBranch.create({ data: { repositoryId, name, headCommitId } });
        const files = await tx.repositoryFile.findMany({ where: { repositoryId, branch: from } });
        if (files.length)
          await tx.repositoryFile.createMany({
            data: files.map((f) => ({ repositoryId, branch: name, path: f.path, size: f.size, sha256: f.sha256, contentType: f.contentType, blobKey: f.blobKey, commitId: f.commitId })),
          });
        return created;
      });
    } catch (err) {
      if (isUniqueViolation(err)) return undefined;
      throw err;
    }
  }

  files(repositoryId: string, branch: string) {
    return this.prisma.repositoryFile.findMany({ where: { repositoryId, branch }, orderBy: { path: 'asc' } });
  }

  file(repositoryId: string, branch: string, path: string) {
    return this.prisma.repositoryFile.findUnique({ where: { repositoryId_branch_path: { repositoryId, branch, path } } });
  }

  /**
   * A commit of `stored` on `branch`, in one transaction: the commit, each file's row (new or
   * replaced) and the branch's head. Returns the commit and the blobs the files replaced, or
   * undefined when the branch is gone (nothing written).
   */
  async commit(repositoryId: string, branch: string, message: string, authorId: string, changes: CommitFileView[], stored: StoredFile[]) {
    try {
      return await this.prisma.$transaction(async (tx) => {
        const created = await tx.repositoryCommit.create({
          data: { repositoryId, branch, message, authorId, changes: changes as unknown as Prisma.InputJsonValue },
        });
        const previous = await tx.repositoryFile.findMany({ where: { repositoryId, branch, path: { in: stored.map((s) => s.path) } }, select: { blobKey: true } });
        for (const s of stored) {
          const data = { size: BigInt(s.size), sha256: s.sha256, contentType: s.contentType, blobKey: s.key, commitId: created.id };
          await tx.repositoryFile.upsert({ where: { repositoryId_branch_path: { repositoryId, branch, path: s.path } }, create: { repositoryId, branch, path: s.path, ...data }, update: data });
        }
        const updated = await tx.repositoryBranch.updateMany({ where: { repositoryId, name: branch }, data: { headCommitId: created.id } });
        if (updated.count === 0) throw new BranchGone();
        return { commit: created, replaced: previous.map((p) => p.blobKey) };
      });
    } catch (err) {
      if (err instanceof BranchGone) return undefined;
      throw err;
    }
  }

  /**
   * Of these blob keys, those still in use: a file of any branch points at it, or a fine-tune that
   * has not finished was tokenized on it (its pinned dataset).
   */
  async blobsInUse(keys: string[]): Promise<Set<string>> {
    const [files, pinned] = await Promise.all([
      this.prisma.repositoryFile.findMany({ where: { blobKey: { in: keys } }, select: { blobKey: true } }),
      this.prisma.fineTune.findMany({ where: { datasetBlobKey: { in: keys }, finishedAt: null }, select: { datasetBlobKey: true } }),
    ]);
    return new Set([...files.map((f) => f.blobKey), ...pinned.flatMap((p) => (p.datasetBlobKey ? [p.datasetBlobKey] : []))]);
  }
}

/** The branch was deleted between the upload's check and its commit: the transaction rolls back. */
class BranchGone extends Error {}
