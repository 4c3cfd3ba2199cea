import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Link, type Span, type Tracer } from '@opentelemetry/api';
import { ExportResultCode, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPExporterBase } from '@opentelemetry/otlp-exporter-base';
import { convertLegacyHttpOptions, createOtlpHttpExportDelegate } from '@opentelemetry/otlp-exporter-base/node-http';
import { JsonTraceSerializer, TraceExporterMetricsHelper } from '@opentelemetry/otlp-transformer';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type ReadableSpan,
  type Sampler,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace';
import { requestContext, type SpanHold } from './request-context';

/** The standard OTEL_* settings atelier reads (validated once, in AppConfig). */
export interface TracingSettings {
  /** Off when neither is set. */
  OTEL_EXPORTER_OTLP_ENDPOINT?: string;
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?: string;
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' | 'http/json';
  OTEL_SERVICE_NAME?: string;
  OTEL_TRACES_SAMPLER: 'always_on' | 'always_off' | 'traceidratio' | 'parentbased_always_on' | 'parentbased_always_off' | 'parentbased_traceidratio';
  OTEL_TRACES_SAMPLER_ARG?: number;
  OTEL_RESOURCE_ATTRIBUTES?: string;
  OTEL_GENAI_CAPTURE_CONTENT: boolean;
  /** Finished spans held for export at most; past it they are dropped and counted. */
  OTEL_BSP_MAX_QUEUE_SIZE: number;
}


/** The error envelope's type of a failure (an ApiError's `type`), else internal_error. */
export function errorTypeOf(err: unknown): string {
  const type = (err as { type?: unknown } | null)?.type;
  return typeof type === 'string' ? type : 'internal_error';
}

/** Spans dropped rather than slowing a request: the queue was full, or the collector did not take them. */
export const droppedSpans = { queueFull: 0, exportFailed: 0 };

const MAX_BATCH = 512;
const FLUSH_EVERY_MS = 1000;

/**
 * Holds finished spans (at most `maxQueue`) and hands them to the OTLP exporter in batches, one
 * export at a time. Nothing a request does ever waits on the collector: a full queue drops the
 * span, a failed export drops its batch, and both are counted (atelier_trace_spans_dropped_total).
 */
class BoundedSpanProcessor implements SpanProcessor {
  private queue: ReadableSpan[] = [];
  private exporting: Promise<void> | undefined;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly exporter: SpanExporter,
    private readonly maxQueue: number,
  ) {
    this.timer = setInterval(() => void this.flushOnce(), FLUSH_EVERY_MS);
    this.timer.unref();
  }

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if (!(span.spanContext().traceFlags & 1)) return;
    if (this.queue.length >= this.maxQueue) {
      droppedSpans.queueFull++;
      return;
    }
    this.queue.push(span);
    if (this.queue.length >= MAX_BATCH) void this.flushOnce();
  }

  private flushOnce(): Promise<void> {
    if (this.exporting || this.queue.length === 0) return this.exporting ?? Promise.resolve();
    const batch = this.queue.splice(0, MAX_BATCH);
    this.exporting = new Promise<void>((resolve) => {
      try {
        this.exporter.export(batch, (result) => {
          if (result.code !== ExportResultCode.SUCCESS) droppedSpans.exportFailed += batch.length;
          resolve();
        });
      } catch {
        droppedSpans.exportFailed += batch.length;
        resolve();
      }
    }).finally(() => (this.exporting = undefined));
    return this.exporting;
  }

  async forceFlush(): Promise<void> {
    while (this.queue.length > 0 || this.exporting) await (this.exporting ?? this.flushOnce());
  }

  async shutdown(): Promise<void> {
    clearInterval(this.timer);
    await this.forceFlush().catch(() => undefined);
    await this.exporter.shutdown().catch(() => undefined);
  }
}

function samplerOf(settings: TracingSettings): Sampler {
  const ratio = () => new TraceIdRatioBasedSampler(settings.OTEL_TRACES_SAMPLER_ARG ?? 1);
  switch (settings.OTEL_TRACES_SAMPLER) {
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio();
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio() });
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    // always_on, the default: a caller's traceparent flag does not decide.
    default:
      return new AlwaysOnSampler();
  }
}

/** OTEL_RESOURCE_ATTRIBUTES: `key=value,key=value`, values percent-encoded. */
function resourceAttributes(raw: string | undefined): Attributes {
  const out: Attributes = {};
  for (const pair of (raw ?? '').split(',')) {
    const at = pair.indexOf('=');
    if (at <= 0) continue;
    try {
      out[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      // a malformed pair is skipped, as the SDK's own detector does
    }
  }
  return out;
}

function exporterOf(settings: TracingSettings): SpanExporter {
  const url = settings.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? `${(settings.OTEL_EXPORTER_OTLP_ENDPOINT as string).replace(/\/+$/, '')}/v1/traces`;
  // A collector that does not answer within this is given up on (the batch is dropped and counted).
  const options = { url, timeoutMillis: 5000 };
  if (settings.OTEL_EXPORTER_OTLP_PROTOCOL === 'http/json') {
    // The OTLP/HTTP JSON exporter, assembled from the same parts OTLPTraceExporter (protobuf) is.
    return new OTLPExporterBase<ReadableSpan[]>(
      createOtlpHttpExportDelegate(convertLegacyHttpOptions(options, 'TRACES', 'v1/traces', { 'Content-Type': 'application/json' }), JsonTraceSerializer, 'otlp_http_json_span_exporter', TraceExporterMetricsHelper, undefined),
    ) as unknown as SpanExporter;
  }
  return new OTLPTraceExporter(options);
}

interface Active {
  tracer: Tracer;
  provider: TracerProvider;
  captureContent: boolean;
}
let active: Active | undefined;
const propagator = new W3CTraceContextPropagator();
const carrierGetter = {
  keys: (carrier: Record<string, string | undefined>) => Object.keys(carrier),
  get: (carrier: Record<string, string | undefined>, key: string) => carrier[key],
};
const carrierSetter = { set: (carrier: Record<string, string>, key: string, value: string) => void (carrier[key] = value) };

/**
 * OpenTelemetry traces for one process. Off (the default: no OTLP endpoint) costs one boolean
 * check per would-be span; on, spans go to the collector through a bounded queue.
 */
export const tracing = {
  /** Whether spans are recorded at all (an endpoint is configured). */
  get on(): boolean {
    return active !== undefined;
  },

  get captureContent(): boolean {
    return active?.captureContent ?? false;
  },

  start(settings: TracingSettings, defaultServiceName: string, version: string): void {
    if (active || !(settings.OTEL_EXPORTER_OTLP_ENDPOINT || settings.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)) return;
    const provider = new TracerProvider({
      sampler: samplerOf(settings),
      resource: resourceFromAttributes({
        ...resourceAttributes(settings.OTEL_RESOURCE_ATTRIBUTES),
        'service.name': settings.OTEL_SERVICE_NAME ?? defaultServiceName,
        'service.version': version,
      }),
      spanProcessors: [new BoundedSpanProcessor(exporterOf(settings), settings.OTEL_BSP_MAX_QUEUE_SIZE)],
    });
    active = { tracer: provider.getTracer('atelier', version), provider, captureContent: settings.OTEL_GENAI_CAPTURE_CONTENT };
  },

  /** Exports what is left (bounded by the exporter's timeout) and stops. */
  async stop(): Promise<void> {
    const was = active;
    active = undefined;
    await was?.provider.shutdown().catch(() => undefined);
  },

  /** The context of the work in progress (its request or job), where spans hang. */
  current(): Context {
    return (requestContext.current()?.otel as Context | undefined) ?? ROOT_CONTEXT;
  },

  /** A span, a child of the current one unless `parent` is given; undefined when tracing is off. */
  startSpan(name: string, options: { kind?: SpanKind; attributes?: Attributes; links?: Link[] } = {}, parent?: Context): Span | undefined {
    if (!active) return undefined;
    return active.tracer.startSpan(name, options, parent ?? tracing.current());
  },

  /** Runs `fn` with `span` as the current span (for the spans and the traceparent of what it calls). */
  within<T>(span: Span | undefined, fn: () => T): T {
    if (!span) return fn();
    const ctx = requestContext.current();
    return requestContext.run({ ...(ctx ?? { requestId: '' }), otel: trace.setSpan(tracing.current(), span) }, fn);
  },

  /**
   * Runs `fn` inside `span` and ends the span: with the attributes `describe` reads off the result,
   * or with the error recorded (and rethrown).
   */
  async traced<T>(span: Span, fn: () => Promise<T>, describe: (result: T) => Attributes): Promise<T> {
    try {
      const result = await tracing.within(span, fn);
      span.setAttributes(describe(result));
      return result;
    } catch (err) {
      tracing.failed(err, span);
      throw err;
    } finally {
      span.end();
    }
  },

  /** A context continuing the caller's trace (W3C traceparent and tracestate). */
  extract(headers: Record<string, string | undefined>): Context {
    return propagator.extract(ROOT_CONTEXT, headers, carrierGetter);
  },

  /** The current span's traceparent (and tracestate), to send on: empty when off or outside a trace. */
  inject(ctx: Context = tracing.current()): Record<string, string> {
    const headers: Record<string, string> = {};
    if (active) propagator.inject(ctx, headers, carrierSetter);
    return headers;
  },

  /**
   * What goes to an upstream provider: the traceparent only. A caller's tracestate is its vendors'
   * data and never leaves for a third party.
   */
  upstreamHeaders(ctx: Context = tracing.current()): Record<string, string> {
    const { traceparent } = tracing.inject(ctx);
    return traceparent ? { traceparent } : {};
  },

  /**
   * A stage of the current span's work (auth, chat.validate, chat.rpc...): the function returned,
   * called when it ends, records it as an event of that span named as the stage histogram names
   * it, with its duration (and error type, if it failed). A stage that ends after its span did
   * (the settle, after the answer went out) becomes a child span of its own instead. Events, not
   * spans, because a request has half a dozen stages and every span costs its export.
   */
  stageMark(name: string): (ms: number, errorType?: string) => void {
    const parent = tracing.current();
    const span = trace.getSpan(parent);
    if (!active || !span) return () => undefined;
    const tracer = active.tracer;
    const startTime = Date.now();
    return (ms, errorType) => {
      const attributes: Attributes = { 'atelier.stage.duration_ms': Math.round(ms * 1000) / 1000, ...(errorType && { 'error.type': errorType }) };
      if (span.isRecording()) span.addEvent(name, attributes);
      else tracer.startSpan(name, { startTime, attributes }, parent).end();
    };
  },

  /**
   * Keeps the request's span open until the function returned is called: for work that goes on after
   * the answer (the settle), so its stages are still events of that span. The span still ends at
   * the time its response closed. Without it each such stage would be a span of its own, one more
   * to export per request.
   */
  hold(): () => void {
    const hold = requestContext.current()?.spanHold;
    if (!hold) return () => undefined;
    hold.count++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--hold.count === 0 && hold.span) hold.span.end(hold.closedAt);
    };
  },

  /** The response closed: the request's span ends now, or, while work holds it, when that is done. */
  endOrDefer(hold: SpanHold | undefined, span: Span): void {
    if (!hold || hold.count === 0) return span.end();
    hold.closedAt = performance.timeOrigin + performance.now();
    hold.span = span;
  },

  /** Sets attributes on the current span (the request's, or the job's). */
  annotate(attributes: Attributes): void {
    if (active) trace.getSpan(tracing.current())?.setAttributes(attributes);
  },

  /** Marks the current span failed with the error envelope's type. */
  fail(type: string, message: string, span: Span | undefined = trace.getSpan(tracing.current())): void {
    if (!active || !span) return;
    span.setAttribute('error.type', type);
    span.setStatus({ code: SpanStatusCode.ERROR, message });
  },

  /** fail() for a caught error: its envelope type (or `type`, when the caller knows better) and its message. */
  failed(err: unknown, span?: Span, type: string = errorTypeOf(err)): void {
    tracing.fail(type, (err as Error | null)?.message ?? String(err), span);
  },

  /** The trace and span id of the work in progress, for log lines. */
  ids(): { trace_id: string; span_id: string } | undefined {
    if (!active) return undefined;
    const span = trace.getSpan(tracing.current());
    if (!span) return undefined;
    const { traceId, spanId } = span.spanContext();
    return { trace_id: traceId, span_id: spanId };
  },
};

export { SpanKind, SpanStatusCode, type Span };
