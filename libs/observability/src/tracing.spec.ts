import { Writable } from 'node:stream';
import { JsonLogger } from './json-logger';
import { requestContext } from './request-context';
import { droppedSpans, tracing } from './tracing';

const SETTINGS = {
  // Nothing listens on port 9 (discard): spans go nowhere, which changes nothing here.
  OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9',
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' as const,
  OTEL_TRACES_SAMPLER: 'parentbased_always_on' as const,
  OTEL_GENAI_CAPTURE_CONTENT: false,
  OTEL_BSP_MAX_QUEUE_SIZE: 16,
};

describe('tracing', () => {
  afterEach(() => tracing.stop());

  it('is off without an endpoint: no span, no traceparent, log lines as before', () => {
    tracing.start({ ...SETTINGS, OTEL_EXPORTER_OTLP_ENDPOINT: undefined }, 'test', '0');
    expect(tracing.on).toBe(false);
    expect(tracing.startSpan('x')).toBeUndefined();
    expect(tracing.inject()).toEqual({});
  });

  it("continues a caller's traceparent, and log lines written inside a span carry its trace and span ids", () => {
    tracing.start(SETTINGS, 'test', '0');
    const parent = tracing.extract({ traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' });
    const span = tracing.startSpan('work', {}, parent)!;
    const lines: string[] = [];
    const sink = new Writable({ write: (chunk: Buffer, _enc, done) => (lines.push(chunk.toString()), done()) });
    const logger = new JsonLogger('test', 'info', sink as never);
    requestContext.run({ requestId: 'r1' }, () => tracing.within(span, () => logger.log('inside')));
    span.end();
    const line = JSON.parse(lines[0]) as Record<string, string>;
    expect(line).toMatchObject({ requestId: 'r1', trace_id: '4bf92f3577b34da6a3ce929d0e0e4736', span_id: span.spanContext().spanId });
    expect(tracing.inject(tracing.extract({ traceparent: `00-4bf92f3577b34da6a3ce929d0e0e4736-${span.spanContext().spanId}-01` })).traceparent).toBe(
      `00-4bf92f3577b34da6a3ce929d0e0e4736-${span.spanContext().spanId}-01`,
    );
  });

  it('drops spans past the queue bound instead of holding them, and counts them', () => {
    tracing.start(SETTINGS, 'test', '0');
    const before = droppedSpans.queueFull;
    for (let i = 0; i < 100; i++) tracing.startSpan(`s${i}`)!.end();
    expect(droppedSpans.queueFull - before).toBeGreaterThan(0);
  });
});
