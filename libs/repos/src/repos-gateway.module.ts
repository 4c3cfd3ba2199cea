import { Module } from '@nestjs/common';
import { RepositoriesService } from './repositories.service';

/** Needs PrismaService (runtime) and BlobStore (StorageModule) from the app. */
@Module({
  providers: [RepositoriesService],
  exports: [RepositoriesService],
})
export class ReposGatewayModule {}
