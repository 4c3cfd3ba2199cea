import type { UploadItem } from '@atelier/contracts';

/** A repository after its namespace was resolved and authorized. */
export interface RepositoryRecord {
  id: string;
  namespaceId: string;
  namespace: string;
  name: string;
  description: string | null;
  createdAt: Date;
}

export type { UploadItem };

export interface BranchView {
  name: string;
  head_commit_id: string | null;
  created_at: number;
  updated_at: number;
}

export interface RepositoryFileView {
  path: string;
  size: number;
  sha256: string;
  content_type: string;
  commit_id: string | null;
  updated_at: number;
}

export interface RepositoryView {
  namespace: string;
  name: string;
  description: string | null;
  created_at: number;
  branches: BranchView[];
  /** The branch whose files are listed. */
  branch: string;
  files: RepositoryFileView[];
}

export interface CommitFileView {
  path: string;
  size: number;
  sha256: string;
  content_type: string;
}

export interface CommitView {
  id: string;
  branch: string;
  message: string;
  /** User id of the uploader. */
  author: string;
  timestamp: number;
  files: CommitFileView[];
}
