import { Module } from '@nestjs/common';
import { RepositoriesService } from './repositories.service';
import { ReposRepository } from './repos.repository';

/** Needs PrismaService (runtime) and BlobStore (StorageModule) from the app. */
@Module({
  providers: [ReposRepository, RepositoriesService],
  exports: [RepositoriesService],
})
export class ReposGatewayModule {}
