import { Injectable } from '@nestjs/common';
import { PrismaService } from '@atelier/db';
import { newWebhookSecret } from './webhook-signature';

/** One delivery attempt of a webhook message, as recorded. */
export interface WebhookDeliveryRecord {
  generationId: string | null;
  fineTuneId: string | null;
  webhookId: string;
  type: string;
  attempt: number;
  statusCode: number | null;
  error: string | null;
  final: boolean;
}

/** The namespaces' webhook signing secrets and the record of every delivery attempt. */
@Injectable()
export class WebhooksRepository {
  constructor(private readonly prisma: PrismaService) {}

  /** The namespace's signing secret, made on first use. */
  async secret(namespaceId: string): Promise<string> {
    // Concurrent first reads make one secret: the insert that loses does nothing, and both read the winner.
    await this.prisma.$executeRaw`
      INSERT INTO webhook_secrets (namespace_id, secret) VALUES (${namespaceId}::uuid, ${newWebhookSecret()})
      ON CONFLICT (namespace_id) DO NOTHING`;
    const row = await this.prisma.webhookSecret.findUniqueOrThrow({ where: { namespaceId } });
    return row.secret;
  }

  /** A new secret for the namespace, at once: signatures made with the old one stop verifying. */
  async rotateSecret(namespaceId: string): Promise<string> {
    const secret = newWebhookSecret();
    await this.prisma.webhookSecret.upsert({ where: { namespaceId }, create: { namespaceId, secret }, update: { secret, createdAt: new Date() } });
    return secret;
  }

  async recordDelivery(attempt: WebhookDeliveryRecord): Promise<void> {
    await this.prisma.webhookDelivery.create({ data: attempt });
  }

  /** A generation's delivery attempts, oldest first. */
  deliveriesOf(generationId: string) {
    return this.prisma.webhookDelivery.findMany({ where: { generationId }, orderBy: [{ at: 'asc' }, { attempt: 'asc' }] });
  }
}
