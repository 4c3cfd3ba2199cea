import { ApiError } from '@atelier/contracts';

/** The queue's webhook fields: stored with the generation and echoed like any parameter, never given to the model. */
export const WEBHOOK_FIELDS = ['webhook', 'webhook_events_filter'] as const;
export const WEBHOOK_EVENTS = ['processing', 'completed'] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

export interface WebhookRequest {
  url: string;
  events: WebhookEvent[];
}

/** The parameters the model sees: the submitted ones without the webhook fields. */
export function modelParams(params: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(params).filter(([k]) => !(WEBHOOK_FIELDS as readonly string[]).includes(k)));
}

/**
 * Validates `webhook` (an absolute http(s) URL) and `webhook_events_filter` (some of
 * `processing`, `completed`; default `["completed"]`) of an enqueue; undefined without a webhook.
 * Where the URL points is checked when a delivery goes out (its address may change meanwhile).
 */
export function parseWebhookRequest(body: Record<string, unknown>): WebhookRequest | undefined {
  const { webhook, webhook_events_filter: filter } = body;
  if (webhook === undefined) {
    if (filter !== undefined) throw ApiError.badRequest('webhook_events_filter needs a webhook URL');
    return undefined;
  }
  if (typeof webhook !== 'string' || webhook.length > 2048) throw ApiError.badRequest('webhook must be an absolute http(s) URL of at most 2048 characters');
  let url: URL;
  try {
    url = new URL(webhook);
  } catch {
    throw ApiError.badRequest(`webhook must be an absolute http(s) URL, got ${JSON.stringify(webhook.slice(0, 100))}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw ApiError.badRequest(`webhook must be an http(s) URL, got ${url.protocol}`);
  if (url.username || url.password) throw ApiError.badRequest('webhook must not carry credentials in the URL');
  let events: WebhookEvent[] = ['completed'];
  if (filter !== undefined) {
    if (!Array.isArray(filter) || filter.length === 0 || filter.some((e) => !(WEBHOOK_EVENTS as readonly unknown[]).includes(e)))
      throw ApiError.badRequest(`webhook_events_filter must be a non-empty array of ${WEBHOOK_EVENTS.join(', ')}`);
    events = [...new Set(filter as WebhookEvent[])];
  }
  return { url: webhook, events };
}
