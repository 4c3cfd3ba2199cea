import { randomUUID } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import { ApiError } from '@atelier/contracts';
import { Prisma, PrismaService } from '@atelier/db';
import { BlobStore, type BlobObject } from '@atelier/storage';
import { assertBranchName, assertRepoName, contentTypeFor, DEFAULT_BRANCH, filePath, pathSegments } from './repository-names';
import type {
  BranchView,
  CommitFileView,
  CommitView,
  RepositoryFileView,
  RepositoryRecord,
  RepositoryView,
  UploadItem,
} from './repository-types';

/** Who acts: the namespace (already authorized by the caller) and the user. */
export interface RepositoryActor {
  namespaceId: string;
  namespace: string;
  userId: string;
}

const unix = (d: Date) => Math.floor(d.getTime() / 1000);

function isUniqueViolation(err: unknown): boolean {
  return err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2002';
}

/**
 * Repositories of files per namespace, with branches and commit-like upload records. File
 * bytes live in the blob store under `<namespace>/repos/<repository id>/<uuid>`; Postgres holds
 * which path on which branch points at which blob. Authorization (namespace membership) is
 * the caller's job: every method takes an already-resolved namespace.
 */
/** The 404 for a repository the namespace does not have (also read by the fine-tune routes' own statements). */
export const repositoryNotFound = (namespace: string, name: string) => ApiError.notFound(`Repository not found: ${namespace}/${name}`);

@Injectable()
export class RepositoriesService {
  private readonly logger = new Logger(RepositoriesService.name);

  constructor(
    private readonly prisma: PrismaService,
    private readonly blobs: BlobStore,
  ) {}

  async create(actor: RepositoryActor, name: string, description?: string): Promise<RepositoryView> {
    assertRepoName(name);
    try {
      const repo = await this.prisma.repository.create({
        data: {
          namespaceId: actor.namespaceId,
          name,
          description: description ?? null,
          branches: { create: { name: DEFAULT_BRANCH } },
        },
      });
      return this.view(repo, actor.namespace, DEFAULT_BRANCH);
    } catch (err) {
      if (isUniqueViolation(err)) throw ApiError.conflict(`Repository '${actor.namespace}/${name}' already exists`);
      throw err;
    }
  }

  /** The repository or a 404 naming it. */
  async find(namespaceId: string, namespace: string, name: string): Promise<RepositoryRecord> {
    const repo = await this.prisma.repository.findUnique({ where: { namespaceId_name: { namespaceId, name } } });
    if (!repo) throw repositoryNotFound(namespace, name);
    return { id: repo.id, namespaceId, namespace, name: repo.name, description: repo.description, createdAt: repo.createdAt };
  }

  async describe(repo: RepositoryRecord, branch = DEFAULT_BRANCH): Promise<RepositoryView> {
    await this.requireBranch(repo, branch);
    return this.view(repo, repo.namespace, branch);
  }

  async listBranches(repo: RepositoryRecord): Promise<BranchView[]> {
    const branches = await this.prisma.repositoryBranch.findMany({ where: { repositoryId: repo.id }, orderBy: { createdAt: 'asc' } });
    return branches.map(toBranchView);
  }

  /** A new branch pointing at the same files (and blobs) as `from`. */
  async createBranch(repo: RepositoryRecord, name: string, from = DEFAULT_BRANCH): Promise<BranchView> {
    assertBranchName(name);
    const source = await this.requireBranch(repo, from);
    try {
      const branch = await this.prisma.$transaction(async (tx) => {
        const created = await tx.repositoryBranch.create({ data: { repositoryId: repo.id, name, headCommitId: source.headCommitId } });
        const files = await tx.repositoryFile.findMany({ where: { repositoryId: repo.id, branch: from } });
        if (files.length)
          await tx.repositoryFile.createMany({
            data: files.map((f) => ({
              repositoryId: repo.id,
              branch: name,
              path: f.path,
              size: f.size,
              sha256: f.sha256,
              contentType: f.contentType,
              blobKey: f.blobKey,
              commitId: f.commitId,
            })),
          });
        return created;
      });
      return toBranchView(branch);
    } catch (err) {
      if (isUniqueViolation(err)) throw ApiError.conflict(`Branch '${name}' already exists in ${repo.namespace}/${repo.name}`);
      throw err;
    }
  }

  /**
   * Streams every file of a multipart upload into the blob store, then records them in one
   * transaction as a commit on `branch` under `directory`. Nothing is recorded unless every
   * part was stored; blobs of a failed upload and blobs no longer referenced are removed.
   */
  async upload(
    repo: RepositoryRecord,
    branch: string,
    directory: string,
    items: AsyncIterable<UploadItem>,
    author: { userId: string; username: string },
  ): Promise<CommitView> {
    const authorId = author.userId;
    const dir = pathSegments(directory, 'directory');
    await this.requireBranch(repo, branch);
    const stored: { path: string; key: string; size: number; sha256: string; contentType: string }[] = [];
    let message: string | undefined;
    try {
      for await (const item of items) {
        if (item.kind === 'field') {
          if (item.name !== 'message') throw ApiError.badRequest(`Unknown form field '${item.name}'; only 'message' is accepted`);
          message = item.value;
          continue;
        }
        if (!['file', 'files', 'files[]'].includes(item.fieldname)) {
          item.stream.resume();
          throw ApiError.badRequest(`Unknown file field '${item.fieldname}'; send 'file' or 'files[]' parts`);
        }
        const path = filePath(dir, item.filename);
        if (stored.some((s) => s.path === path)) {
          item.stream.resume();
          throw ApiError.badRequest(`The upload contains '${path}' twice`);
        }
        const key = `${repo.namespace}/repos/${repo.id}/${randomUUID()}`;
        const contentType = contentTypeFor(path, item.mimetype);
        const blob = await this.blobs.put(key, item.stream, contentType);
        stored.push({ path, key, size: blob.size, sha256: blob.sha256, contentType });
        if (item.truncated()) throw new ApiError('payload_too_large', `File '${path}' is larger than the upload limit`);
      }
      if (stored.length === 0) throw ApiError.badRequest("The upload contains no files; send a 'file' part or several 'files[]' parts");
      if (message !== undefined && message.length > 4096) throw ApiError.badRequest('message must be at most 4096 characters');
    } catch (err) {
      await this.deleteBlobs(stored.map((s) => s.key));
      throw err;
    }

    const changes: CommitFileView[] = stored.map((s) => ({ path: s.path, size: s.size, sha256: s.sha256, content_type: s.contentType }));
    const commitMessage = message?.trim() || `Upload ${stored.length === 1 ? stored[0].path : `${stored.length} files`}`;
    let replaced: string[] = [];
    let commit;
    try {
      ({ commit, replaced } = await this.prisma.$transaction(async (tx) => {
        const created = await tx.repositoryCommit.create({
          data: { repositoryId: repo.id, branch, message: commitMessage, authorId, changes: changes as unknown as Prisma.InputJsonValue },
        });
        const previous = await tx.repositoryFile.findMany({
          where: { repositoryId: repo.id, branch, path: { in: stored.map((s) => s.path) } },
          select: { blobKey: true },
        });
        for (const s of stored) {
          const data = { size: BigInt(s.size), sha256: s.sha256, contentType: s.contentType, blobKey: s.key, commitId: created.id };
          await tx.repositoryFile.upsert({
            where: { repositoryId_branch_path: { repositoryId: repo.id, branch, path: s.path } },
            create: { repositoryId: repo.id, branch, path: s.path, ...data },
            update: data,
          });
        }
        const updated = await tx.repositoryBranch.updateMany({ where: { repositoryId: repo.id, name: branch }, data: { headCommitId: created.id } });
        if (updated.count === 0) throw ApiError.notFound(`Branch not found: ${branch}`);
        return { commit: created, replaced: previous.map((p) => p.blobKey) };
      }));
    } catch (err) {
      await this.deleteBlobs(stored.map((s) => s.key));
      throw err;
    }
    await this.deleteUnreferenced(replaced);
    return { id: commit.id, branch, message: commit.message, author: author.username, timestamp: unix(commit.createdAt), files: changes };
  }

  /** The stored file at `branch`/`path`, or undefined. */
  async findFile(repositoryId: string, branch: string, path: string) {
    return this.prisma.repositoryFile.findUnique({ where: { repositoryId_branch_path: { repositoryId, branch, path } } });
  }

  async download(repo: RepositoryRecord, branch: string, rawPath: string): Promise<{ file: RepositoryFileView; blob: BlobObject }> {
    await this.requireBranch(repo, branch);
    const path = pathSegments(rawPath).join('/');
    const file = path ? await this.findFile(repo.id, branch, path) : null;
    if (!file) throw ApiError.notFound(`File not found: ${path || '(empty path)'} on branch ${branch} of ${repo.namespace}/${repo.name}`);
    const blob = await this.blobs.get(file.blobKey);
    if (!blob) throw ApiError.notFound(`The stored content of ${path} is missing`);
    return { file: toFileView(file), blob };
  }

  private async requireBranch(repo: RepositoryRecord, branch: string) {
    const found = await this.prisma.repositoryBranch.findUnique({ where: { repositoryId_name: { repositoryId: repo.id, name: branch } } });
    if (!found) throw ApiError.notFound(`Branch not found: ${branch} in ${repo.namespace}/${repo.name}`);
    return found;
  }

  private async view(repo: { id: string; name: string; description: string | null; createdAt: Date }, namespace: string, branch: string): Promise<RepositoryView> {
    const [branches, files] = await Promise.all([
      this.prisma.repositoryBranch.findMany({ where: { repositoryId: repo.id }, orderBy: { createdAt: 'asc' } }),
      this.prisma.repositoryFile.findMany({ where: { repositoryId: repo.id, branch }, orderBy: { path: 'asc' } }),
    ]);
    return {
      namespace,
      name: repo.name,
      description: repo.description,
      created_at: unix(repo.createdAt),
      branches: branches.map(toBranchView),
      branch,
      files: files.map(toFileView),
    };
  }

  private async deleteBlobs(keys: string[]): Promise<void> {
    await Promise.all(
      keys.map((k) => this.blobs.delete(k).catch((err: Error) => this.logger.warn(`Could not delete blob ${k}: ${err.message}`))),
    );
  }

  /**
   * Blobs can be shared between branches, and a fine-tune that has not finished pins the bytes it
   * was tokenized on: only the ones nothing points at any more go.
   */
  private async deleteUnreferenced(keys: string[]): Promise<void> {
    if (keys.length === 0) return;
    const [still, pinned] = await Promise.all([
      this.prisma.repositoryFile.findMany({ where: { blobKey: { in: keys } }, select: { blobKey: true } }),
      this.prisma.fineTune.findMany({ where: { datasetBlobKey: { in: keys }, finishedAt: null }, select: { datasetBlobKey: true } }),
    ]);
    const used = new Set([...still.map((s) => s.blobKey), ...pinned.map((p) => p.datasetBlobKey)]);
    await this.deleteBlobs(keys.filter((k) => !used.has(k)));
  }
}

function toBranchView(b: { name: string; headCommitId: string | null; createdAt: Date; updatedAt: Date }): BranchView {
  return { name: b.name, head_commit_id: b.headCommitId, created_at: unix(b.createdAt), updated_at: unix(b.updatedAt) };
}

function toFileView(f: { path: string; size: bigint; sha256: string; contentType: string | null; commitId: string | null; updatedAt: Date }): RepositoryFileView {
  return {
    path: f.path,
    size: Number(f.size),
    sha256: f.sha256,
    content_type: f.contentType ?? 'application/octet-stream',
    commit_id: f.commitId,
    updated_at: unix(f.updatedAt),
  };
}
