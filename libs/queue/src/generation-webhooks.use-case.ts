import { Injectable } from '@nestjs/common';
import { NamespaceAccess, type Caller } from '@atelier/auth';
import type { WebhookDeliveries } from '@atelier/contracts';
import { ReadGenerations } from './read-generations.use-case';
import { WebhooksRepository } from './webhooks.repository';

export type WebhookDeliveryView = WebhookDeliveries['deliveries'][number];

/** GET /api/ai/queue/:id/webhooks and the namespace's signing secret (GET, rotate). */
@Injectable()
export class GenerationWebhooks {
  constructor(
    private readonly reads: ReadGenerations,
    private readonly access: NamespaceAccess,
    private readonly webhooks: WebhooksRepository,
  ) {}

  /** The delivery attempts of a generation's webhook messages, oldest first (its owner's namespace only). */
  async deliveries(caller: Caller, id: string): Promise<WebhookDeliveries> {
    const row = await this.reads.findVisible(caller, id);
    const rows = await this.webhooks.deliveriesOf(row.id);
    return {
      deliveries: rows.map((d) => ({ webhook_id: d.webhookId, type: d.type as WebhookDeliveryView['type'], attempt: d.attempt, status_code: d.statusCode, error: d.error, at: d.at.toISOString() })),
    };
  }

  /** The webhook signing secret of a namespace the caller belongs to (made on first read), or a new one. */
  async secret(caller: Caller, namespace: unknown, rotate = false): Promise<{ key: string }> {
    const scope = await this.access.resolve(caller, namespace);
    return { key: rotate ? await this.webhooks.rotateSecret(scope.id) : await this.webhooks.secret(scope.id) };
  }
}
