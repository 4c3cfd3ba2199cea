export { ReposGatewayModule } from './repos-gateway.module';
export { RepositoriesService, repositoryNotFound, type RepositoryActor } from './repositories.service';
export { DEFAULT_BRANCH, REPO_NAME_PATTERN, BRANCH_NAME_PATTERN, assertBranchName, assertRepoName, pathSegments } from './repository-names';
export type {
  BranchView,
  CommitFileView,
  CommitView,
  RepositoryFileView,
  RepositoryRecord,
  RepositoryView,
  UploadItem,
} from './repository-types';
export { ReposRoutesModule } from './repos-routes.module';
