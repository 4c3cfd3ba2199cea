import Fastify, { type FastifyInstance } from 'fastify';
import multipart from '@fastify/multipart';
import { streamingMultipart } from './streaming-multipart';

/** A real server on a free port: a multipart upload route, and a GET that tells what each response carries. */
async function serve(register: (app: FastifyInstance) => void): Promise<{ url: string; close: () => Promise<void> }> {
  const app = Fastify();
  register(app);
  app.post('/upload', async (req) => {
    const seen: string[] = [];
    for await (const part of req.parts()) {
      if (part.type === 'field') seen.push(`${part.fieldname}=${String(part.value)}`);
      else seen.push(`${part.fieldname}:${part.filename}:${(await part.toBuffer()).toString('utf8')}`);
    }
    return { seen };
  });
  app.post('/save', async (req) => {
    // Without await: the refusal must arrive as a rejection, as the plugin's own method fails.
    return req.saveRequestFiles().then(
      () => ({ saved: true }),
      (err: Error) => ({ refused: err.message }),
    );
  });
  app.get('/listeners', (_req, reply) => {
    void reply.send({ close: reply.raw.listenerCount('close') });
  });
  const address = await app.listen({ port: 0, host: '127.0.0.1' });
  return { url: address, close: () => app.close() };
}

const upload = () => {
  const form = new FormData();
  form.append('purpose', 'fine-tune');
  form.append('file', new Blob(['{"a":1}\n'], { type: 'application/jsonl' }), 'train.jsonl');
  return form;
};

describe('streamingMultipart', () => {
  const servers: { url: string; close: () => Promise<void> }[] = [];
  afterAll(async () => Promise.all(servers.map((s) => s.close())));
  const start = async (register: (app: FastifyInstance) => void) => {
    const server = await serve(register);
    servers.push(server);
    return server.url;
  };

  it('streams the parts of an upload, fields and files, in order', async () => {
    const url = await start((app) => void app.register(streamingMultipart));
    const res = await fetch(`${url}/upload`, { method: 'POST', body: upload() });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ seen: ['purpose=fine-tune', 'file:train.jsonl:{"a":1}\n'] });
  });

  it('adds nothing to a request that carries no upload, where the stock plugin adds a close listener to every response', async () => {
    const listeners = async (url: string) => ((await (await fetch(`${url}/listeners`)).json()) as { close: number }).close;
    const bare = await listeners(await start(() => undefined));
    const stock = await listeners(await start((app) => void app.register(multipart)));
    const streaming = await listeners(await start((app) => void app.register(streamingMultipart)));
    expect(stock).toBe(bare + 1);
    expect(streaming).toBe(bare);
  });

  it('refuses saveRequestFiles, whose temporary files nothing would delete', async () => {
    const url = await start((app) => void app.register(streamingMultipart));
    const res = await fetch(`${url}/save`, { method: 'POST', body: upload() });
    expect(await res.json()).toEqual({ refused: expect.stringMatching(/saveRequestFiles\(\) is not available: stream the parts with req\.parts\(\)/) });
  });
});
