import { Injectable } from '@nestjs/common';
import { PrismaService } from '@atelier/db';
import { newWebhookSecret } from './webhook-signature';

/** Each namespace's webhook signing secret, made on first use; rotating replaces it at once. */
@Injectable()
export class WebhookSecrets {
  constructor(private readonly prisma: PrismaService) {}

  async get(namespaceId: string): Promise<string> {
    // Concurrent first reads make one secret: the insert that loses does nothing, and both read the winner.
    await this.prisma.$executeRaw`
      INSERT INTO webhook_secrets (namespace_id, secret) VALUES (${namespaceId}::uuid, ${newWebhookSecret()})
      ON CONFLICT (namespace_id) DO NOTHING`;
    const row = await this.prisma.webhookSecret.findUniqueOrThrow({ where: { namespaceId } });
    return row.secret;
  }

  async rotate(namespaceId: string): Promise<string> {
    const secret = newWebhookSecret();
    await this.prisma.webhookSecret.upsert({ where: { namespaceId }, create: { namespaceId, secret }, update: { secret, createdAt: new Date() } });
    return secret;
  }
}
