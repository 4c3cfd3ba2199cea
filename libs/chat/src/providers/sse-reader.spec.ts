import { sseData } from './sse-reader';

async function collect(parts: string[]): Promise<string[]> {
  const enc = new TextEncoder();
  async function* body() {
    for (const p of parts) yield enc.encode(p);
  }
  const out: string[] = [];
  for await (const d of sseData(body())) out.push(d);
  return out;
}

describe('sseData', () => {
  it('yields each event when its blank line arrives, across arbitrary byte boundaries', async () => {
    expect(await collect(['da', 'ta: {"a"', ':1}\n', '\ndata: [DO', 'NE]\n\n'])).toEqual(['{"a":1}', '[DONE]']);
  });

  it('handles CRLF, comments, other fields and multi-line data', async () => {
    expect(await collect([': keep-alive\r\n\r\nevent: x\r\nid: 1\r\ndata: one\r\ndata:two\r\n\r\n'])).toEqual(['one\ntwo']);
  });

  it('drops an event cut off before its blank line', async () => {
    expect(await collect(['data: {"a":1}\n\ndata: {"b":'])).toEqual(['{"a":1}']);
  });

  it('splits UTF-8 characters across chunks correctly', async () => {
    const bytes = new TextEncoder().encode('data: héllo 🦊\n\n');
    async function* body() {
      for (const b of bytes) yield new Uint8Array([b]);
    }
    const out: string[] = [];
    for await (const d of sseData(body())) out.push(d);
    expect(out).toEqual(['héllo 🦊']);
  });
});
