import { Module, type DynamicModule } from '@nestjs/common';
import type { AppConfig } from '@atelier/config';
import { ServiceRuntimeModule } from '@atelier/runtime';

/** Chat completions: consumes the chat-completion queue (see the chat issue). */
@Module({})
export class ChatModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: ChatModule,
      imports: [ServiceRuntimeModule.forRoot({ service: 'chat', config, consumes: [] })],
    };
  }
}
