import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Controller, Get, Inject, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PublicRoute } from '@atelier/auth';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ApiError } from '@atelier/contracts';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
};

/**
 * No script but the console's own files, no inline script or style attribute injection, no
 * framing; images and videos from this origin (results are /files links) and blob: previews.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "media-src 'self' blob:",
  "connect-src 'self'",
  "font-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'same-origin',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'permissions-policy': 'camera=(), microphone=(), geolocation=(), payment=()',
};

interface ConsoleFile {
  body: Buffer;
  type: string;
}

/** The built console (Vite's dist): CONSOLE_DIR, or dist/console found walking up from this file (dist/apps/gateway/console in the image). */
function consoleDir(configured: string | undefined): string | undefined {
  if (configured) return configured;
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    for (const candidate of [path.join(dir, 'console'), path.join(dir, 'dist/console')]) if (existsSync(path.join(candidate, 'index.html'))) return candidate;
    if (path.dirname(dir) === dir) return undefined;
  }
}

function readTree(root: string): Map<string, ConsoleFile> {
  const files = new Map<string, ConsoleFile>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else files.set(path.relative(root, full).split(path.sep).join('/'), { body: readFileSync(full), type: TYPES[path.extname(entry.name)] ?? 'application/octet-stream' });
    }
  };
  walk(root);
  return files;
}

/**
 * Serves the web console under /console, same origin as the API: its session cookie then
 * authenticates the API and the event stream, with no CORS. The files (a few hundred KB) are read
 * once; Vite names assets by content hash, so they are cached for a year, and index.html never.
 */
@PublicRoute()
@Controller('console')
export class ConsoleController {
  private files?: Map<string, ConsoleFile>;

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  private load(): Map<string, ConsoleFile> {
    if (!this.files) {
      const dir = consoleDir(this.config.CONSOLE_DIR);
      if (!dir) throw new ApiError('route_not_found', 'The console is not built: run `npm run build:console` (npm start does it), or set CONSOLE_DIR');
      this.files = readTree(dir);
    }
    return this.files;
  }

  @Get()
  index(@Res() reply: FastifyReply): Promise<void> {
    return this.send(reply, 'index.html');
  }

  @Get('*')
  file(@Req() req: FastifyRequest<{ Params: { '*': string } }>, @Res() reply: FastifyReply): Promise<void> {
    const wanted = req.params['*'];
    if (this.load().has(wanted)) return this.send(reply, wanted);
    if (wanted.startsWith('assets/')) throw ApiError.notFound('No such console file');
    // Any other path is a page of the app: its router reads the path.
    return this.send(reply, 'index.html');
  }

  private async send(reply: FastifyReply, name: string): Promise<void> {
    const file = this.load().get(name);
    if (!file) throw ApiError.notFound('No such console file');
    reply.headers(SECURITY_HEADERS);
    await reply
      .header('content-type', file.type)
      .header('cache-control', name.startsWith('assets/') ? 'public, max-age=31536000, immutable' : 'no-cache')
      .send(file.body);
  }
}
