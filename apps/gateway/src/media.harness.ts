import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { MediaServiceModule } from '@atelier/media';
import { createService } from '@atelier/runtime';
import { startGateway, type GatewayHarness } from './gateway.harness';

export const TEST_PUBLIC_URL = 'http://atelier.test';

export interface AssetServer {
  base: string;
  port: number;
  close(): Promise<void>;
}

/** A real HTTP server for input media (and failures such as 403), started by the test. */
export async function startAssetServer(routes: Record<string, (req: IncomingMessage, res: ServerResponse) => void>): Promise<AssetServer> {
  const server = http.createServer((req, res) => {
    const handler = routes[(req.url ?? '').split('?')[0]];
    if (handler) handler(req, res);
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    base: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface MediaStack {
  gw: GatewayHarness;
  media: NestFastifyApplication;
  /** A gateway path for a result link (links are built on PUBLIC_URL). */
  local(url: string): string;
  close(): Promise<void>;
}

/**
 * A real gateway plus a real media service consuming the render queues in-process, on a fresh
 * database, Redis prefix and storage directory.
 */
export async function startMediaStack(overrides: Record<string, string> = {}): Promise<MediaStack> {
  const gw = await startGateway({
    STORAGE_DIR: mkdtempSync(path.join(tmpdir(), 'atelier-media-')),
    PUBLIC_URL: TEST_PUBLIC_URL,
    ...overrides,
  });
  const media = await createService(MediaServiceModule.forRoot(gw.env.config), gw.env.config, { service: 'media' });
  return {
    gw,
    media,
    local: (url) => url.replace(TEST_PUBLIC_URL, ''),
    close: async () => {
      await media.close();
      await gw.close();
    },
  };
}
