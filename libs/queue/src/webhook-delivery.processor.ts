import { Inject, Injectable, Logger } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { WEBHOOK_DELIVERY_QUEUE, type WebhookDeliveryJob } from '@atelier/contracts';
import { HandlesQueue, JobQueues, retryThroughOutage, type JobHandler } from '@atelier/runtime';
import { guardedPost, MediaFetchError } from '@atelier/safe-fetch';
import { WebhooksRepository } from './webhooks.repository';
import { signWebhook } from './webhook-signature';

/** How long an attempt's record waits out a database outage before the attempt goes on unrecorded. */
const RECORD_WAIT_MS = 60_000;
/** No answer within this is a failed attempt (the receiver should answer at once and work later). */
const DELIVERY_TIMEOUT_MS = 10_000;
/** Retries wait their scheduled delay plus up to this share of it, so receivers back from an outage are not hit all at once. */
const JITTER = 0.25;

/**
 * Delivers one webhook message attempt: `{type, timestamp, data}` POSTed with the Standard
 * Webhooks headers (webhook-id, webhook-timestamp, webhook-signature), signed with the
 * namespace's secret. A 2xx ends the message. A non-2xx, a connection error or no answer in 10 s
 * schedules the next attempt after the next WEBHOOK_RETRY_DELAYS_MS delay, until the schedule is
 * used up. An address the policy refuses (loopback, private, link-local, metadata, unless in
 * MEDIA_FETCH_ALLOWED_HOSTS; checked on the connection itself) is not retried. Every attempt is
 * recorded (webhook_deliveries).
 */
@Injectable()
@HandlesQueue(WEBHOOK_DELIVERY_QUEUE)
export class WebhookDeliveryProcessor implements JobHandler<typeof WEBHOOK_DELIVERY_QUEUE> {
  private readonly logger = new Logger(WebhookDeliveryProcessor.name);

  constructor(
    private readonly webhooks: WebhooksRepository,
    private readonly queues: JobQueues,
    @Inject(APP_CONFIG) private readonly config: Pick<AppConfig, 'WEBHOOK_RETRY_DELAYS_MS' | 'MEDIA_FETCH_ALLOWED_HOSTS'>,
  ) {}

  async handle(job: WebhookDeliveryJob): Promise<void> {
    const body = JSON.stringify({ type: job.type, timestamp: job.timestamp, data: job.data });
    const timestamp = Math.floor(Date.now() / 1000);
    const secret = await this.webhooks.secret(job.namespaceId);
    let statusCode: number | null = null;
    let error: string | null = null;
    let retry = true;
    try {
      const res = await guardedPost(job.url, {
        body,
        timeoutMs: DELIVERY_TIMEOUT_MS,
        allowedHosts: this.config.MEDIA_FETCH_ALLOWED_HOSTS,
        headers: {
          'content-type': 'application/json',
          'user-agent': 'atelier-webhooks/1',
          'webhook-id': job.webhookId,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signWebhook(secret, job.webhookId, timestamp, body),
        },
      });
      statusCode = res.status;
      if (res.status >= 200 && res.status < 300) retry = false;
      else error = `The receiver answered HTTP ${res.status}`;
    } catch (err) {
      error = (err as Error).message;
      if (err instanceof MediaFetchError && (err.reason === 'blocked_address' || err.reason === 'invalid_url')) retry = false;
    }
    const delay = this.config.WEBHOOK_RETRY_DELAYS_MS[job.attempt - 1];
    const final = !retry || delay === undefined;
    if (error !== null && final && retry) error += `; given up after ${job.attempt} attempts`;
    // The attempt happened whether or not its record lands: a record that cannot be written (the
    // database away) is retried through the outage, and a delivery still owed is scheduled all the
    // same, so an outage costs at most a line of the history, never the message.
    await retryThroughOutage(
      () =>
        this.webhooks.recordDelivery({ generationId: job.generationId ?? null, fineTuneId: job.fineTuneId ?? null, webhookId: job.webhookId, type: job.type, attempt: job.attempt, statusCode, error, final }),
      { maxWaitMs: RECORD_WAIT_MS, onWait: (service) => this.logger.warn(`Recording attempt ${job.attempt} of webhook ${job.webhookId} waits for ${service}`) },
    ).catch((err: Error) => this.logger.warn(`Attempt ${job.attempt} of webhook ${job.webhookId} was made but not recorded: ${err.message}`));
    if (final) {
      if (error !== null) this.logger.warn(`Webhook ${job.webhookId} for ${job.fineTuneId ? `fine-tune ${job.fineTuneId}` : job.batchId ? `batch ${job.batchId}` : `generation ${job.generationId}`} not delivered: ${error}`);
      return;
    }
    const next = job.attempt + 1;
    await this.queues.add(WEBHOOK_DELIVERY_QUEUE, { ...job, attempt: next }, { jobId: `${job.webhookId}.${next}`, delay: Math.round(delay * (1 + Math.random() * JITTER)) });
  }
}
