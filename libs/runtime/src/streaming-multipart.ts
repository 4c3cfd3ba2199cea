import type { FastifyInstance, FastifyPluginCallback } from 'fastify';
import { fastifyMultipart, type FastifyMultipartBaseOptions } from '@fastify/multipart';

/** What @fastify/multipart's hooks exist for, and that its streaming parts() never needs. */
const TEMP_FILE_HOOKS = new Set(['onRequest', 'onResponse']);

/**
 * @fastify/multipart as atelier uses it: parts are streamed (`req.parts()`) straight to storage,
 * never saved to temporary files. The plugin adds two async hooks to every route of the
 * instance, only to delete the temporary files `saveRequestFiles()` writes: a 'close' listener
 * on every response and a promise chain after it, on every chat completion and GET too. A bare
 * Fastify GET cost 1.0-2.5 us more CPU with them (three alternating runs of 64,000 requests,
 * 13.6-14.3 against 14.6-16.8 us), 1-3 % of what a chat request costs the gateway. Here the plugin
 * is registered without them, and `saveRequestFiles()`, which would then leave its files behind,
 * refuses to run.
 */
export const streamingMultipart: FastifyPluginCallback<FastifyMultipartBaseOptions> = (fastify, options, done) => {
  const facade = new Proxy(fastify, {
    get(target, key) {
      if (key === 'addHook')
        return (name: string, hook: never) => (TEMP_FILE_HOOKS.has(name) ? facade : target.addHook(name as 'onRequest', hook));
      if (key === 'decorateRequest')
        return (name: string, value: unknown) =>
          target.decorateRequest(
            name,
            name === 'saveRequestFiles'
              ? // Async like the method it stands in for: a caller's .catch() sees the refusal.
                async () => {
                  throw new Error('saveRequestFiles() is not available: stream the parts with req.parts() (streamingMultipart)');
                }
              : value,
          );
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  }) as FastifyInstance;
  fastifyMultipart(facade, options, done);
};
// Like fastify-plugin: its parser and decorators belong to the instance it is registered on, not to a child context.
Object.assign(streamingMultipart, { [Symbol.for('skip-override')]: true, [Symbol.for('fastify.display-name')]: 'streaming-multipart' });
