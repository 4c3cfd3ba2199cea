import { randomUUID } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import { ApiError } from '@atelier/contracts';
import { BlobStore, type BlobObject } from '@atelier/storage';
import { ReposRepository, type StoredFile } from './repos.repository';
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
    private readonly rows: ReposRepository,
    private readonly blobs: BlobStore,
  ) {}

  async create(actor: RepositoryActor, name: string, description?: string): Promise<RepositoryView> {
    assertRepoName(name);
    const repo = await this.rows.create(actor.namespaceId, name, description ?? null);
    if (!repo) throw ApiError.conflict(`Repository '${actor.namespace}/${name}' already exists`);
    return this.view(repo, actor.namespace, DEFAULT_BRANCH);
  }

  /** The repository or a 404 naming it. */
  async find(namespaceId: string, namespace: string, name: string): Promise<RepositoryRecord> {
    const repo = await this.rows.byName(namespaceId, name);
    if (!repo) throw repositoryNotFound(namespace, name);
    return { id: repo.id, namespaceId, namespace, name: repo.name, description: repo.description, createdAt: repo.createdAt };
  }

  async describe(repo: RepositoryRecord, branch = DEFAULT_BRANCH): Promise<RepositoryView> {
    await this.requireBranch(repo, branch);
    return this.view(repo, repo.namespace, branch);
  }

  async listBranches(repo: RepositoryRecord): Promise<BranchView[]> {
    const branches = await this.rows.branches(repo.id);
    return branches.map(toBranchView);
  }

  /** A new branch pointing at the same files (and blobs) as `from`. */
  async createBranch(repo: RepositoryRecord, name: string, from = DEFAULT_BRANCH): Promise<BranchView> {
    assertBranchName(name);
    const source = await this.requireBranch(repo, from);
    const branch = await this.rows.createBranch(repo.id, name, from, source.headCommitId);
    if (!branch) throw ApiError.conflict(`Branch '${name}' already exists in ${repo.namespace}/${repo.name}`);
    return toBranchView(branch);
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
    const stored: StoredFile[] = [];
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
    let committed;
    try {
      committed = await this.rows.commit(repo.id, branch, commitMessage, authorId, changes, stored);
      if (!committed) throw ApiError.notFound(`Branch not found: ${branch}`);
    } catch (err) {
      await this.deleteBlobs(stored.map((s) => s.key));
      throw err;
    }
    const { commit, replaced } = committed;
    await this.deleteUnreferenced(replaced);
    return { id: commit.id, branch, message: commit.message, author: author.username, timestamp: unix(commit.createdAt), files: changes };
  }

  /** The stored file at `branch`/`path`, or undefined. */
  async findFile(repositoryId: string, branch: string, path: string) {
    return this.rows.file(repositoryId, branch, path);
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
    const found = await this.rows.branch(repo.id, branch);
    if (!found) throw ApiError.notFound(`Branch not found: ${branch} in ${repo.namespace}/${repo.name}`);
    return found;
  }

  private async view(repo: { id: string; name: string; description: string | null; createdAt: Date }, namespace: string, branch: string): Promise<RepositoryView> {
    const [branches, files] = await Promise.all([this.rows.branches(repo.id), this.rows.files(repo.id, branch)]);
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
    const used = await this.rows.blobsInUse(keys);
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
