import { Injectable, Logger } from '@nestjs/common';
import { WEBHOOK_DELIVERY_QUEUE } from '@atelier/contracts';
import { requestContext } from '@atelier/observability';
import { JobQueues } from '@atelier/runtime';
import { SignedUrls } from '@atelier/storage';
import { toGenerationRecord } from './generation-record';
import { GenerationsRepository } from './generations.repository';
import { parseWebhookRequest, type WebhookEvent } from './webhook-request';

/** The webhook-id of a generation's message of one kind: the same on every attempt, and a second add is a no-op. */
export function webhookId(generationId: string, event: WebhookEvent): string {
  return `msg_${generationId.replace(/-/g, '')}_${event}`;
}

/**
 * Turns a generation's transitions into webhook messages for the URL it was enqueued with:
 * `processing` when it starts, `completed` when it succeeds, fails or is cancelled, each only
 * if its webhook_events_filter asks for it. The message carries the record as it is at that
 * moment; delivery (signing, retries, the address check) is WebhookDeliveryProcessor's.
 */
@Injectable()
export class WebhookNotifier {
  private readonly logger = new Logger(WebhookNotifier.name);

  constructor(
    private readonly generations: GenerationsRepository,
    private readonly queues: JobQueues,
    private readonly urls: SignedUrls,
  ) {}

  /**
   * Queues the message if the generation asked for it; a failure is logged, and the transition
   * stands. `params` spares a read when the caller has the row at hand and it has no webhook.
   */
  async notify(generationId: string, event: WebhookEvent, params?: unknown): Promise<void> {
    try {
      await this.queueMessage(generationId, event, params);
    } catch (err) {
      // The generation's own transition stands; its webhook message is what is lost (logged).
      this.logger.warn(`Webhook message for generation ${generationId} (${event}) could not be queued: ${(err as Error).message}`);
    }
  }

  /** As notify, but throws when the message could not be queued (the outbox then tries again). */
  async queueMessage(generationId: string, event: WebhookEvent, params?: unknown): Promise<void> {
    if (params !== undefined && (params as { webhook?: unknown } | null)?.webhook === undefined) return;
    const row = await this.generations.withNamespace(generationId);
    if (!row) return;
    const webhook = parseWebhookRequest(row.params as Record<string, unknown>);
    if (!webhook || !webhook.events.includes(event)) return;
    const id = webhookId(generationId, event);
    await this.queues.add(
      WEBHOOK_DELIVERY_QUEUE,
      {
        webhookId: id,
        generationId,
        namespaceId: row.namespaceId,
        type: event === 'processing' ? 'generation.processing' : 'generation.completed',
        url: webhook.url,
        timestamp: new Date().toISOString(),
        data: toGenerationRecord(row, row.namespace.name, (key) => this.urls.url(key)),
        attempt: 1,
        requestId: requestContext.current()?.requestId ?? generationId,
      },
      { jobId: `${id}.1` },
    );
  }
}
