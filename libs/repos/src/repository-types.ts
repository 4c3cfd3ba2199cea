import type { BranchView, CommitFileView, CommitView, RepositoryFileView, RepositoryView, UploadItem } from '@atelier/contracts';

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

// The answers' views are the API's shapes (libs/contracts), declared once.
export type { BranchView, CommitFileView, CommitView, RepositoryFileView, RepositoryView };
