import v8 from 'node:v8';
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { FastHistogram } from './fast-histogram';
import { droppedSpans, errorTypeOf, tracing } from './tracing';
import { fullCollectionCount, liveHeapBytes, watchLiveHeap } from './live-heap';

/** Seconds; spans health checks (ms) to minute-long video renders. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/** Finer buckets for the stages of one hot-path request, which take tenths of a millisecond. */
const STAGE_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.1, 0.5, 2, 10, 60];

export type JobOutcome = 'completed' | 'failed';
export type GenerationOutcome = 'succeeded' | 'failed' | 'cancelled';
export type GenerationMode = 'sync' | 'queue';
/** Redis-backed readings (queue depth) are taken at scrape time by these. */
type Collector = () => Promise<void> | void;

/**
 * One app's Prometheus registry and the metrics atelier records. Every app has its own instance
 * (provided by the runtime), so several apps in one process (tests) never mix their numbers.
 * Names follow Prometheus conventions: base units (seconds), `_total` for counters.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly collectors = new Set<Collector>();

  readonly httpRequestDuration: FastHistogram<'method' | 'route' | 'status_code'>;
  readonly jobDuration: FastHistogram<'queue' | 'outcome'>;
  readonly queueJobs: Gauge<'queue' | 'state'>;
  readonly generations: Counter<'model' | 'outcome' | 'mode'>;
  readonly creditsReserved: Counter;
  readonly creditsSettled: Counter;
  readonly creditReleases: Counter;
  readonly overlapRefusals: Counter;
  readonly sseConnections: Gauge;
  readonly upstreamDuration: FastHistogram<'provider' | 'outcome'>;
  readonly processFaults: Counter<'kind'>;
  readonly stageDuration: FastHistogram<'stage'>;
  readonly jobWait: FastHistogram<'queue'>;
  readonly generationWait: FastHistogram<'pool' | 'namespace'>;

  constructor(service: string) {
    this.registry.setDefaultLabels({ service });
    collectDefaultMetrics({ register: this.registry });
    const registers = [this.registry];
    const collectors = this.collectors;
    this.httpRequestDuration = new FastHistogram('atelier_http_request_duration_seconds', 'HTTP requests by route pattern and status code (streams count until they end)', ['method', 'route', 'status_code'], LATENCY_BUCKETS, registers);
    this.jobDuration = new FastHistogram('atelier_job_duration_seconds', 'Time a worker spent on a job, by queue and outcome', ['queue', 'outcome'], LATENCY_BUCKETS, registers);
    this.queueJobs = new Gauge({
      name: 'atelier_queue_jobs',
      help: 'Jobs per queue and state (waiting, active, delayed, failed; waiting includes jobs placed by priority), read from Redis at scrape time',
      labelNames: ['queue', 'state'],
      registers,
      async collect() {
        await Promise.all([...collectors].map((c) => c()));
      },
    });
    this.generations = new Counter({
      name: 'atelier_generations_total',
      help: 'Finished image/video generations by model, outcome and mode (sync request or queue)',
      labelNames: ['model', 'outcome', 'mode'],
      registers,
    });
    this.creditsReserved = new Counter({ name: 'atelier_credits_reserved_total', help: 'Credits reserved before work started', registers });
    this.creditsSettled = new Counter({ name: 'atelier_credits_settled_total', help: 'Credits charged when reservations were settled', registers });
    this.creditReleases = new Counter({ name: 'atelier_credit_releases_total', help: 'Reservations released without a charge (failure, cancel)', registers });
    this.overlapRefusals = new Counter({
      name: 'atelier_overlapped_refusals_total',
      help: 'Requests handed off while their credit reservation was being taken, then refused by it (cancelled; work may have started upstream, nothing charged)',
      registers,
    });
    this.processFaults = new Counter({
      name: 'atelier_process_faults_total',
      help: 'Errors that reached the process level (kind: backing_service, unhandled_rejection, uncaught_exception)',
      labelNames: ['kind'],
      registers,
    });
    this.sseConnections = new Gauge({ name: 'atelier_sse_connections', help: 'Open Server-Sent Events streams', registers });
    this.stageDuration = new FastHistogram('atelier_stage_duration_seconds', 'Stages of a request on the hot path (auth, chat.validate, chat.reserve, chat.rpc, chat.settle, ...)', ['stage'], STAGE_BUCKETS, registers);
    this.jobWait = new FastHistogram('atelier_job_wait_seconds', 'Time from a job being added to a worker starting it, by queue (hand-off latency plus queueing)', ['queue'], STAGE_BUCKETS, registers);
    this.generationWait = new FastHistogram(
      'atelier_generation_queue_wait_seconds',
      'Time a queued generation waited from enqueue to its start, by pool and namespace (the 10 namespaces this worker started most, the rest as other)',
      ['pool', 'namespace'],
      LATENCY_BUCKETS,
      registers,
    );
    watchLiveHeap();
    new Gauge({
      name: 'atelier_heap_live_bytes',
      help: 'V8 heap in use right after the last full (mark-compact) garbage collection: the live JavaScript set, which a leak makes grow (RSS also moves with how V8 sizes the heap); 0 before the first full collection',
      registers,
      collect() {
        this.set(liveHeapBytes() ?? 0);
      },
    });
    new Counter({
      name: 'atelier_heap_full_collections_total',
      help: 'Full (mark-compact) garbage collections of the process, the readings behind atelier_heap_live_bytes',
      registers,
      collect() {
        this.reset();
        this.inc(fullCollectionCount());
      },
    });
    new Gauge({
      name: 'atelier_heap_resident_bytes',
      help: 'V8 heap pages backed by physical memory; process_resident_memory_bytes minus this is the memory outside the JavaScript heap (nodejs_heap_size_total_bytes also counts pages V8 committed but has not touched yet)',
      registers,
      collect() {
        this.set(v8.getHeapStatistics().total_physical_size);
      },
    });
    new Counter({
      name: 'atelier_trace_spans_dropped_total',
      help: 'Trace spans dropped instead of slowing requests (reason: queue_full, the export queue was at OTEL_BSP_MAX_QUEUE_SIZE; export_failed, the collector did not take them)',
      labelNames: ['reason'],
      registers,
      collect() {
        this.reset();
        this.inc({ reason: 'queue_full' }, droppedSpans.queueFull);
        this.inc({ reason: 'export_failed' }, droppedSpans.exportFailed);
      },
    });
    this.upstreamDuration = new FastHistogram('atelier_upstream_request_duration_seconds', 'Calls to model providers, by provider and outcome', ['provider', 'outcome'], LATENCY_BUCKETS, registers);
  }

  /**
   * Starts timing one stage of a request (auth, validate, reserve, the hand-off, settle...); call
   * the result when the stage ends. `npm run bench:chat` reads these to say where time goes.
   */
  stage(name: string): () => void {
    const started = performance.now();
    if (tracing.on) {
      const mark = tracing.stageMark(name);
      return () => {
        const ms = performance.now() - started;
        this.stageDuration.observe({ stage: name }, ms / 1000);
        mark(ms);
      };
    }
    return () => this.stageDuration.observe({ stage: name }, (performance.now() - started) / 1000);
  }

  /** timed() with tracing on: the stage is marked on the request's span, a failure too (tracing.stageMark). */
  private traced<T>(name: string, work: () => Promise<T>): Promise<T> {
    const started = performance.now();
    const mark = tracing.stageMark(name);
    let running: Promise<T>;
    try {
      running = work();
    } catch (err) {
      mark(performance.now() - started, errorTypeOf(err));
      return Promise.reject(err as Error);
    }
    return running.then(
      (result) => {
        const ms = performance.now() - started;
        this.stageDuration.observe({ stage: name }, ms / 1000);
        mark(ms);
        return result;
      },
      (err: unknown) => {
        mark(performance.now() - started, errorTypeOf(err));
        throw err;
      },
    );
  }

  /**
   * Times `work` as one stage, recorded when it succeeds (as with stage()). Not an async
   * function: that would add a promise and two microtask turns to every stage timed, four per
   * chat request.
   */
  timed<T>(name: string, work: () => Promise<T>): Promise<T> {
    if (tracing.on) return this.traced(name, work);
    const end = this.stage(name);
    let running: Promise<T>;
    try {
      running = work();
    } catch (err) {
      // As an async function would: a synchronous throw becomes the promise's rejection.
      return Promise.reject(err as Error);
    }
    return running.then((result) => {
      end();
      return result;
    });
  }

  /** Runs `collect` on every scrape (before the queue gauge is read); returns the unregister function. */
  addCollector(collect: Collector): () => void {
    this.collectors.add(collect);
    return () => this.collectors.delete(collect);
  }

  /** Times `work` into a histogram, labelled with its outcome. */
  async timeUpstream<T>(provider: string, work: () => Promise<T>): Promise<T> {
    const end = this.upstreamDuration.startTimer({ provider });
    try {
      const result = await work();
      end({ outcome: 'ok' });
      return result;
    } catch (err) {
      end({ outcome: 'error' });
      throw err;
    }
  }

  /** The Prometheus text exposition of everything above. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

/** Credits are exact decimals (strings); counters take floats, which is precise enough for rates. */
export function creditAmount(decimal: string): number {
  const n = Number(decimal);
  return Number.isFinite(n) && n > 0 ? n : 0;
}

/**
 * Times `work` as one stage (Metrics.timed) where metrics are provided, and just runs it where
 * they are not: for services that take Metrics as an optional dependency.
 */
export function timedStage<T>(metrics: Metrics | undefined, name: string, work: () => Promise<T>): Promise<T> {
  return metrics ? metrics.timed(name, work) : work();
}
