import { Module, type DynamicModule } from '@nestjs/common';
import { ChatServiceModule } from '@atelier/chat';
import type { AppConfig } from '@atelier/config';

/** Chat completions: consumes the chat-completion queue and runs each model's provider (see @atelier/chat). */
@Module({})
export class ChatModule {
  static forRoot(config: AppConfig): DynamicModule {
    return { module: ChatModule, imports: [ChatServiceModule.forRoot(config)] };
  }
}
