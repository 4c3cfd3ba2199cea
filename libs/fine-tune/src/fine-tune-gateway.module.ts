import { Module } from '@nestjs/common';
import { ReposGatewayModule } from '@atelier/repos';
import { FineTuneDataModule } from './fine-tune-data.module';
import { FineTunesService } from './fine-tunes.service';

/** The gateway's fine-tune wiring (FineTunesService and the repositories); needs the runtime and StorageModule from the app. */
@Module({ imports: [ReposGatewayModule, FineTuneDataModule], providers: [FineTunesService], exports: [FineTunesService, FineTuneDataModule] })
export class FineTuneGatewayModule {}
