import { Module } from '@nestjs/common';
import { ReposGatewayModule } from '@atelier/repos';
import { FineTunesService } from './fine-tunes.service';

/** The gateway's fine-tune wiring (FineTunesService); needs the runtime and StorageModule from the app. */
@Module({ imports: [ReposGatewayModule], providers: [FineTunesService], exports: [FineTunesService] })
export class FineTuneGatewayModule {}
