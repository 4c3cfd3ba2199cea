import { Injectable, Logger } from '@nestjs/common';
import { NamespaceAccess, type Caller } from '@atelier/auth';
import { ApiError, CANCEL_JOBS_CHANNEL, RESPONSE_BACKGROUND_QUEUE, type BackgroundResponseJob } from '@atelier/contracts';
import { randomToken } from '@atelier/random';
import { BroadcastBus, errorSummary, HandlesQueue, JobQueues, toErrorResponse, type JobContext, type JobHandler } from '@atelier/runtime';
import { responseShell, type ResponseObject } from './response-output';
import { fieldError } from './responses-request';
import { KeptResponseEvents, TERMINAL_EVENTS, type KeptEvent } from './kept-response-events';
import { ResponsesRepository } from './responses.repository';
import { inResponsesTerms, ResponsesService, type ResponsesDelivery } from './responses.service';

/** Statuses a background response still runs in. */
const RUNNING = ['queued', 'in_progress'] as const;
const ENDED = new Set(['completed', 'failed', 'incomplete', 'cancelled']);
/** How often a follower looks for new kept events, and for an end no event announces (a cancel). */
const FOLLOW_POLL_MS = 50;
const STATUS_POLL_MS = 1000;

/** How a follower's transport receives the kept events (the controller speaks SSE). */
export interface FollowDelivery {
  signal: AbortSignal;
  event(event: KeptEvent): void;
  end(): void;
}

/**
 * Responses API requests with `background: true`: answered at once with `status: "queued"`,
 * stored, and run off the request by whichever gateway takes the job (RESPONSE_BACKGROUND_QUEUE),
 * so a gateway restart does not lose them. GET shows `queued`, `in_progress`, then `completed`,
 * `failed`, `incomplete` or `cancelled`. With `stream: true` the events are kept while it runs
 * (KeptResponseEvents): the POST streams them as they come, and GET `?stream=true&starting_after=n`
 * resumes a dropped stream after event n. Cancel stops the run where it is: a stream is charged
 * for what it delivered, an unstreamed answer that had not arrived for nothing.
 */
@Injectable()
@HandlesQueue(RESPONSE_BACKGROUND_QUEUE)
export class BackgroundResponses implements JobHandler<typeof RESPONSE_BACKGROUND_QUEUE> {
  private readonly logger = new Logger(BackgroundResponses.name);

  constructor(
    private readonly responses: ResponsesService,
    private readonly store: ResponsesRepository,
    private readonly kept: KeptResponseEvents,
    private readonly queues: JobQueues,
    private readonly bus: BroadcastBus,
    private readonly access: NamespaceAccess,
  ) {}

  /** POST with background: true. Stored first (OpenAI requires store for it), then queued. */
  async start(caller: Caller, rawBody: unknown, requestId: string, delivery: ResponsesDelivery & { follow: FollowDelivery }): Promise<void> {
    const { background: _background, ...rest } = (rawBody ?? {}) as Record<string, unknown>;
    if (rest.store === false) throw fieldError('store', 'background responses are stored: send store: true (or leave it out) with background: true');
    const prepared = await this.responses.prepare(caller, rest);
    const shell: ResponseObject = { ...responseShell(`resp_${randomToken(24)}`, rest, true), status: 'queued', background: true };
    await this.store.save(prepared.scope.id, caller.userId, shell, prepared.newItemsJson, prepared.chainBytes);
    const stream = rest.stream === true;
    if (stream) await this.kept.append(shell.id, { type: 'response.queued', sequence_number: 0, response: shell });
    await this.queues.add(RESPONSE_BACKGROUND_QUEUE, { responseId: shell.id, caller: { ...caller }, body: rest, requestId }, { jobId: shell.id });
    if (stream) return this.follow(caller, shell.id, -1, delivery.follow);
    await delivery.json(shell);
  }

  /** The queued run: in_progress, then the answer (or failure) stored under the same id. */
  async handle(job: BackgroundResponseJob, ctx: JobContext): Promise<void> {
    const caller = job.caller as unknown as Caller;
    const { response: stored } = await this.store.get(job.responseId, async () => true).catch(() => ({ response: undefined }));
    if (!stored || !(RUNNING as readonly string[]).includes(stored.status)) return;
    const shell: ResponseObject = { ...stored, status: 'in_progress' };
    if (!(await this.store.update(job.responseId, shell, RUNNING))) return;
    const stream = job.body.stream === true;
    // A second run (its gateway died) numbers its events after what the first kept.
    const base = stream ? (await this.kept.last(job.responseId)) + 1 : 0;
    let writes = Promise.resolve();
    const keep = (event: KeptEvent) => {
      writes = writes.then(() => this.kept.append(job.responseId, event)).catch((err: unknown) => this.logger.warn(`Keeping an event of ${job.responseId} failed: ${errorSummary(err)}`));
    };
    try {
      await this.responses.create(
        caller,
        job.body,
        job.requestId,
        {
          signal: ctx.signal,
          header: () => undefined,
          event: (event) => keep({ ...event, sequence_number: event.sequence_number + base }),
          end: () => undefined,
          json: async () => undefined,
        },
        { shell, keep: (response) => this.finish(job.responseId, response) },
      );
    } catch (err) {
      if (!ctx.signal.aborted) {
        const error = toErrorResponse(inResponsesTerms(err)).body.error;
        await this.finish(job.responseId, { ...shell, status: 'failed', error: { code: error.type, message: error.message } });
      }
    } finally {
      await writes;
    }
  }

  /** Stores the run's answer, unless the response was cancelled meanwhile (then it stays cancelled). */
  private async finish(id: string, response: ResponseObject): Promise<ResponseObject> {
    const stored = await this.store.update(id, response, ['in_progress']);
    return stored ? response : { ...response, status: 'cancelled' };
  }

  /** POST /api/ai/responses/{id}/cancel. */
  async cancel(caller: Caller, id: string): Promise<ResponseObject> {
    const { response } = await this.store.get(id, (ns) => this.access.canAccess(caller, ns));
    if (response.background !== true) throw ApiError.badRequest(`Only background responses can be cancelled; ${id} was not made with background: true`);
    if (response.status === 'cancelled') return response;
    if (ENDED.has(response.status)) throw ApiError.conflict(`Response ${id} cannot be cancelled: it is ${response.status}`);
    const cancelled = { ...response, status: 'cancelled' };
    if (!(await this.store.update(id, cancelled, RUNNING))) return (await this.store.get(id, async () => true)).response;
    // Queued: its job finds it cancelled. Running: its gateway stops it (the chat call with it).
    await this.queues.remove(RESPONSE_BACKGROUND_QUEUE, id);
    await this.bus.publish(CANCEL_JOBS_CHANNEL, { queue: RESPONSE_BACKGROUND_QUEUE.name, jobIds: [id], reason: 'The response was cancelled' }).catch(() => undefined);
    return cancelled;
  }

  /**
   * GET ?stream=true&starting_after=n: the kept events after n, then the rest as they come, until
   * the stream's last event (or the response ended without one: cancelled).
   */
  async follow(caller: Caller, id: string, startingAfter: number, delivery: FollowDelivery): Promise<void> {
    const { response } = await this.store.get(id, (ns) => this.access.canAccess(caller, ns));
    if (response.background !== true || (await this.kept.last(id)) < 0)
      throw ApiError.badRequest(`Only background responses made with stream: true can be streamed; read ${id} with GET /api/ai/responses/${id}`);
    let from = '-';
    let checked = Date.now();
    let status = response.status;
    for (;;) {
      const { events, next } = await this.kept.read(id, startingAfter, from);
      from = next;
      for (const event of events) {
        delivery.event(event);
        startingAfter = event.sequence_number;
        if (TERMINAL_EVENTS.has(event.type)) return delivery.end();
      }
      if (delivery.signal.aborted) return;
      if (events.length === 0) {
        if (ENDED.has(status)) {
          // Ended without a final event (cancelled mid-run): the stored response is the last word.
          delivery.event({ type: status === 'cancelled' ? 'response.cancelled' : 'response.completed', sequence_number: startingAfter + 1, response: (await this.store.get(id, async () => true)).response });
          return delivery.end();
        }
        await new Promise((r) => setTimeout(r, FOLLOW_POLL_MS));
        if (Date.now() - checked > STATUS_POLL_MS) {
          checked = Date.now();
          status = (await this.store.get(id, async () => true)).response.status;
        }
      }
    }
  }
}
