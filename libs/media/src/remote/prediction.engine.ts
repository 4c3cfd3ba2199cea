import { ApiError } from '@atelier/contracts';
import type { PredictionEngineConfig } from '@atelier/models';
import type { RetryPolicy } from '@atelier/runtime';
import { sniffMediaType } from '@atelier/safe-fetch';
import type { EngineEnvironment, EngineOutput, EngineRequest, EngineResult, MediaEngine } from '../engine';
import { abortableSleep, GenerationCancelledError, throwIfAborted, upstreamError } from '../engine-errors';
import { collectUrls, upstreamJson, upstreamTarget } from './upstream-http';

/** Body fields the service interprets itself; everything else is the model's input. */
const SERVICE_FIELDS = new Set(['model', 'response_format', 'target_namespace', 'num_generations', 'target_repo', 'target_directory']);

export function predictionInput(params: Readonly<Record<string, unknown>>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(params).filter(([k]) => !SERVICE_FIELDS.has(k)));
}

/** What a prediction finished with: output URLs to download, and the seed if the provider says. */
interface Finished {
  urls: string[];
  seed?: number;
}

/** One provider protocol: submit, poll once, fetch the result, cancel. */
interface PredictionProtocol {
  submit(input: Record<string, unknown>): Promise<string>;
  /** undefined while still running (reporting the provider's progress, when it gives one). */
  poll(handle: string, onProgress?: (fraction: number) => void): Promise<Finished | undefined>;
  cancel(handle: string): Promise<void>;
}

interface ReplicatePrediction {
  id?: string;
  status?: 'starting' | 'processing' | 'succeeded' | 'failed' | 'canceled' | 'aborted';
  output?: unknown;
  error?: unknown;
  logs?: unknown;
  urls?: { get?: string; cancel?: string };
}

/**
 * How far a running prediction is, from what providers report: a numeric `progress` (0-1 or
 * percent), else the last sampler line of its logs (`14/28` or `50%`, as tqdm prints them).
 */
export function providerProgress(reported: { progress?: unknown; logs?: unknown }): number | undefined {
  if (typeof reported.progress === 'number' && Number.isFinite(reported.progress)) return reported.progress > 1 ? reported.progress / 100 : reported.progress;
  const logs = Array.isArray(reported.logs)
    ? reported.logs.map((l) => (typeof l === 'string' ? l : typeof (l as { message?: unknown })?.message === 'string' ? (l as { message: string }).message : '')).join('\n')
    : typeof reported.logs === 'string'
      ? reported.logs
      : '';
  const tail = logs.slice(-2000);
  const steps = [...tail.matchAll(/(\d+)\/(\d+)/g)].at(-1);
  if (steps && Number(steps[2]) > 0) return Math.min(1, Number(steps[1]) / Number(steps[2]));
  const percent = [...tail.matchAll(/(\d{1,3})%/g)].at(-1);
  return percent ? Math.min(1, Number(percent[1]) / 100) : undefined;
}

interface FalSubmitted {
  request_id?: string;
  status_url?: string;
  response_url?: string;
  cancel_url?: string;
}

/**
 * Asynchronous prediction-style providers (Replicate predictions, the fal queue): submit,
 * poll with backoff until done, download the outputs. Cancellation (caller gone, job
 * cancelled) cancels the upstream prediction as well, so the provider stops billing for it.
 */
export class PredictionEngine implements MediaEngine {
  constructor(
    private readonly config: PredictionEngineConfig,
    private readonly env: EngineEnvironment,
  ) {}

  async run({ model, params, signal, onProgress }: EngineRequest): Promise<EngineResult> {
    const { provider, key, timeoutMs, retry } = upstreamTarget(this.env, model.id, this.config);
    const deadline = Date.now() + timeoutMs;
    // Cancellation calls must still go out after the caller's signal has fired.
    const cancelSignal = () => AbortSignal.timeout(10_000);
    const protocol = (this.config.style ?? 'replicate') === 'fal' ? this.fal(provider, key, signal, cancelSignal, retry) : this.replicate(provider, key, signal, cancelSignal, retry);

    const handle = await protocol.submit(predictionInput(params));
    let finished: Finished | undefined;
    try {
      let delay = this.env.pollIntervalMs;
      for (;;) {
        finished = await protocol.poll(handle, onProgress);
        if (finished) break;
        if (Date.now() + delay > deadline)
          throw new ApiError('timeout', `The model provider (${provider}) did not finish within ${timeoutMs} ms`);
        await abortableSleep(delay, signal);
        delay = Math.min(this.env.maxPollIntervalMs, Math.round(delay * 1.5));
      }
    } catch (err) {
      if (signal.aborted || (err instanceof ApiError && err.type === 'timeout')) {
        await protocol.cancel(handle).catch((e: Error) => this.env.logger.warn(`${model.id}: cancelling upstream prediction ${handle} failed: ${e.message}`));
      }
      throw err;
    }
    if (finished.urls.length === 0) throw upstreamError(provider, 'the prediction succeeded without any output file');
    const wanted = model.endpoint === '/videos/generate' ? 'video/' : 'image/';
    const outputs: EngineOutput[] = [];
    for (const [i, url] of finished.urls.entries()) {
      throwIfAborted(signal);
      const media = await this.env.fetchInput(url, { accept: [`${wanted}*`], label: `the provider's output ${i + 1}`, signal });
      const contentType = sniffMediaType(media.data) ?? media.contentType;
      outputs.push({ data: media.data, contentType, extension: extensionOf(contentType) });
    }
    return { outputs, seed: typeof params.seed === 'number' ? params.seed : finished.seed };
  }

  private replicate(provider: string, key: string | undefined, signal: AbortSignal, cancelSignal: () => AbortSignal, retry: RetryPolicy): PredictionProtocol {
    const base = this.config.base_url.replace(/\/$/, '');
    const headers: Record<string, string> = key ? { authorization: `Bearer ${key}` } : {};
    const links = new Map<string, { get: string; cancel: string }>();
    return {
      submit: async (input) => {
        const url = this.config.version ? `${base}/predictions` : `${base}/models/${this.config.upstream_model}/predictions`;
        const body = this.config.version ? { version: this.config.version, input } : { input };
        const p = await upstreamJson<ReplicatePrediction>(provider, url, { body, headers, signal, retry });
        if (typeof p.id !== 'string') throw upstreamError(provider, 'the prediction has no id');
        links.set(p.id, { get: p.urls?.get ?? `${base}/predictions/${p.id}`, cancel: p.urls?.cancel ?? `${base}/predictions/${p.id}/cancel` });
        return p.id;
      },
      poll: async (id, onProgress) => {
        const p = await upstreamJson<ReplicatePrediction>(provider, links.get(id)!.get, { headers, signal, retry });
        const progress = providerProgress(p);
        if (progress !== undefined && p.status !== 'succeeded') onProgress?.(progress);
        switch (p.status) {
          case 'succeeded':
            return { urls: collectUrls(p.output) };
          case 'failed':
            throw upstreamError(provider, typeof p.error === 'string' ? p.error : JSON.stringify(p.error ?? 'the prediction failed'));
          case 'canceled':
          case 'aborted':
            if (signal.aborted) throw new GenerationCancelledError();
            throw upstreamError(provider, 'the prediction was cancelled upstream');
          default:
            return undefined;
        }
      },
      cancel: async (id) => {
        await upstreamJson(provider, links.get(id)!.cancel, { method: 'POST', headers, signal: cancelSignal(), retry });
      },
    };
  }

  private fal(provider: string, key: string | undefined, signal: AbortSignal, cancelSignal: () => AbortSignal, retry: RetryPolicy): PredictionProtocol {
    const base = `${this.config.base_url.replace(/\/$/, '')}/${this.config.upstream_model}`;
    const headers: Record<string, string> = key ? { authorization: `Key ${key}` } : {};
    const links = new Map<string, { status: string; response: string; cancel: string }>();
    return {
      submit: async (input) => {
        const r = await upstreamJson<FalSubmitted>(provider, base, { body: input, headers, signal, retry });
        if (typeof r.request_id !== 'string') throw upstreamError(provider, 'the queued request has no request_id');
        const own = `${base}/requests/${r.request_id}`;
        links.set(r.request_id, { status: r.status_url ?? `${own}/status`, response: r.response_url ?? own, cancel: r.cancel_url ?? `${own}/cancel` });
        return r.request_id;
      },
      poll: async (id, onProgress) => {
        const link = links.get(id)!;
        const s = await upstreamJson<{ status?: string; error?: unknown; logs?: unknown; progress?: unknown }>(provider, link.status, { headers, signal, retry });
        if (s.status === 'IN_QUEUE' || s.status === 'IN_PROGRESS') {
          const progress = providerProgress(s);
          if (progress !== undefined) onProgress?.(progress);
          return undefined;
        }
        if (s.status !== 'COMPLETED') throw upstreamError(provider, `unexpected request status ${JSON.stringify(s.status)}`);
        if (s.error) throw upstreamError(provider, typeof s.error === 'string' ? s.error : JSON.stringify(s.error));
        const result = await upstreamJson<Record<string, unknown>>(provider, link.response, { headers, signal, retry });
        return { urls: collectUrls(result), seed: typeof result.seed === 'number' ? result.seed : undefined };
      },
      cancel: async (id) => {
        await upstreamJson(provider, links.get(id)!.cancel, { method: 'PUT', headers, signal: cancelSignal(), retry });
      },
    };
  }
}

function extensionOf(contentType: string): string {
  return (
    { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/webp': 'webp', 'image/gif': 'gif', 'video/mp4': 'mp4', 'video/webm': 'webm', 'video/quicktime': 'mov' }[contentType] ??
    'bin'
  );
}
