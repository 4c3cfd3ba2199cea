import { Inject, Injectable } from '@nestjs/common';
import { secretFromEnv } from '@atelier/config';
import { ApiError, type EmbeddingsJob, type EmbeddingsOutcome } from '@atelier/contracts';
import { ModelCatalog, type EmbeddingModelDefinition } from '@atelier/models';
import { Metrics, SpanKind, tracing } from '@atelier/observability';
import { genAiProvider } from '../gen-ai-provider';
import { OpenAiCompatibleProvider } from '../providers/openai-compatible.provider';
import { shortened, vectorToBase64 } from './embedding-vectors';
import { localEmbedding } from './local-embed';

/** Inputs per upstream call when the catalog does not say (OpenAI's own limit per request). */
const DEFAULT_MAX_BATCH = 2048;
/** Batches of one request in flight at once against the upstream. */
const PARALLEL_BATCHES = 4;

interface UpstreamEmbeddings {
  data: { index: number; embedding: number[] | string }[];
  usage?: { prompt_tokens?: number };
}

/** An upstream answer atelier can use: one embedding per input, each index once. */
function parseUpstream(text: string, inputs: number): UpstreamEmbeddings | undefined {
  const answer = JSON.parse(text) as UpstreamEmbeddings;
  if (!answer || !Array.isArray(answer.data) || answer.data.length !== inputs) return undefined;
  const seen = new Set<number>();
  for (const item of answer.data) {
    if (!Number.isInteger(item.index) || item.index < 0 || item.index >= inputs || seen.has(item.index)) return undefined;
    if (!Array.isArray(item.embedding) && typeof item.embedding !== 'string') return undefined;
    seen.add(item.index);
  }
  return answer;
}

/**
 * The chat service's side of embeddings: local-embed in process, or OpenAI-compatible servers
 * (OpenAI, vLLM, TEI, Ollama) with the model's max_batch splitting the inputs, each batch with
 * chat's retries and fallbacks, and the vectors put back in input order.
 */
@Injectable()
export class EmbeddingsRunner {
  private readonly upstream = new OpenAiCompatibleProvider(secretFromEnv);

  constructor(
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
    private readonly metrics: Metrics,
  ) {}

  async run(job: EmbeddingsJob, signal: AbortSignal): Promise<EmbeddingsOutcome> {
    if (!tracing.on) return this.embed(job, signal);
    const served = this.catalog.get(job.model);
    const span = tracing.startSpan(`embeddings ${job.model}`, {
      kind: SpanKind.CLIENT,
      attributes: {
        'gen_ai.operation.name': 'embeddings',
        'gen_ai.provider.name': served ? genAiProvider(served) : 'unknown',
        'gen_ai.request.model': job.model,
        'atelier.namespace': job.caller.namespace,
        'atelier.inputs': job.input.length,
      },
    })!;
    return tracing.traced(span, () => this.embed(job, signal), (outcome) => ({
      'gen_ai.response.model': job.model,
      'gen_ai.usage.input_tokens': outcome.usage.prompt_tokens,
      'atelier.provider': outcome.provider,
    }));
  }

  private async embed(job: EmbeddingsJob, signal: AbortSignal): Promise<EmbeddingsOutcome> {
    const model = this.catalog.get(job.model);
    if (!model || model.endpoint !== '/embeddings') throw new ApiError('resource_not_found', `Model not found: ${job.model}`);
    const engine = model.engine;
    if (engine.type === 'builtin' && engine.name === 'local-embed') {
      const dims = job.dimensions ?? model.dimensions;
      const vectors = job.input.map((input) => vectorToBase64(shortened(localEmbedding(input, model.dimensions), dims)));
      return { vectors, usage: { prompt_tokens: job.inputTokens, total_tokens: job.inputTokens }, provider: 'local-embed' };
    }
    if (engine.type !== 'openai-compatible') throw new ApiError('service_unavailable', `Model ${model.id} uses the ${engine.type} engine, which does not serve embeddings`);
    return this.metrics.timed('embeddings.provider', () => this.remote(model, job, signal));
  }

  private async remote(model: EmbeddingModelDefinition, job: EmbeddingsJob, signal: AbortSignal): Promise<EmbeddingsOutcome> {
    const size = model.max_batch ?? DEFAULT_MAX_BATCH;
    const batches: { offset: number; input: string[] | number[][] }[] = [];
    for (let offset = 0; offset < job.input.length; offset += size) batches.push({ offset, input: job.input.slice(offset, offset + size) as string[] | number[][] });
    const vectors = new Array<string>(job.input.length);
    let reported = 0;
    let allReported = true;
    let provider = '';
    let next = 0;
    const worker = async () => {
      while (next < batches.length) {
        const batch = batches[next++];
        const { value, provider: label } = await this.upstream.post(
          { model, signal },
          '/embeddings',
          (upstreamModel) => ({ model: upstreamModel, input: batch.input, encoding_format: 'float', ...(job.dimensions !== undefined && { dimensions: job.dimensions }) }),
          (text) => parseUpstream(text, batch.input.length),
        );
        provider = label;
        for (const item of value.data)
          vectors[batch.offset + item.index] = typeof item.embedding === 'string' ? item.embedding : vectorToBase64(item.embedding);
        const tokens = value.usage?.prompt_tokens;
        if (typeof tokens === 'number' && Number.isInteger(tokens) && tokens > 0) reported += tokens;
        else allReported = false;
      }
    };
    await Promise.all(Array.from({ length: Math.min(PARALLEL_BATCHES, batches.length) }, worker));
    // An upstream that reports no usage (some TEI and Ollama versions) is billed by atelier's own count, never as zero.
    const tokens = allReported ? reported : job.inputTokens;
    return { vectors, usage: { prompt_tokens: tokens, total_tokens: tokens }, provider };
  }
}

