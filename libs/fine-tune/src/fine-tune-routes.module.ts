import { Module } from '@nestjs/common';
import { AuthModule } from '@atelier/auth';
import { ReposGatewayModule } from '@atelier/repos';
import { FineTuneCatalogController } from './fine-tune-catalog.controller';
import { FineTuneGatewayModule } from './fine-tune-gateway.module';
import { FineTunesController } from './fine-tunes.controller';

/** Fine-tunes' HTTP routes on the gateway, beside the service they call. */
@Module({ imports: [FineTuneGatewayModule, ReposGatewayModule, AuthModule], controllers: [FineTunesController, FineTuneCatalogController] })
export class FineTuneRoutesModule {}
