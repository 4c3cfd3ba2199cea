import { Module } from '@nestjs/common';
import { AuthModule } from '@atelier/auth';
import { ReposGatewayModule } from './repos-gateway.module';
import { ReposController } from './repos.controller';

/**
 * Repositories' HTTP routes on the gateway. Apart from ReposGatewayModule, which the fine-tune
 * service imports too and must not serve.
 */
@Module({ imports: [ReposGatewayModule, AuthModule], controllers: [ReposController] })
export class ReposRoutesModule {}
