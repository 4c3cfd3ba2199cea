// The console: static files served by the gateway under /console (apps/gateway/src/console.controller.ts).
// CONSOLE_OUT_DIR (set by the Dockerfile) puts them beside the gateway's build in its image.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const here = path.dirname(fileURLToPath(import.meta.url));

export default defineConfig({
  root: here,
  base: '/console/',
  build: { outDir: path.resolve(process.env.CONSOLE_OUT_DIR ?? path.join(here, '../../dist/console')), emptyOutDir: true, target: 'es2022', modulePreload: { polyfill: false }, reportCompressedSize: false },
});
