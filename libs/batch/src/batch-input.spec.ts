import { Readable } from 'node:stream';
import { batchEndpoint } from '@atelier/contracts';
import { checkBatchInput, MAX_BATCH_LINES } from './batch-input';

const line = (customId: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ custom_id: customId, method: 'POST', url: '/v1/chat/completions', body: { model: 'local-chat', messages: [{ role: 'user', content: 'hi' }] }, ...extra });
const known = (model: string) => model === 'local-chat' || model === 'remote-echo';
const file = (lines: string[]) => Readable.from([lines.join('\n') + '\n']);

describe('a batch input file, read as a stream', () => {
  it('accepts good lines (with or without /v1, blank lines skipped) and counts them per model', async () => {
    const check = await checkBatchInput(
      file([line('a'), '', line('b', { url: '/chat/completions' }), line('c', { body: { model: 'remote-echo', messages: [] } })]),
      '/v1/chat/completions',
      known,
    );
    expect(check).toEqual({ lines: 3, models: new Map([['local-chat', 2], ['remote-echo', 1]]), errors: [] });
  });

  it("lists each line's problem with its line number, code and parameter: JSON, custom_id twice, method, url, model", async () => {
    const check = await checkBatchInput(
      file([line('a'), '{not json', line('a'), line('m', { method: 'GET' }), line('u', { url: '/v1/embeddings' }), line('x', { body: { model: 'nope' } }), '[1]', line('', {})]),
      '/v1/chat/completions',
      known,
    );
    expect(check.errors.map((e) => [e.line, e.code, e.param])).toEqual([
      [2, 'invalid_json_line', null],
      [3, 'duplicate_custom_id', 'custom_id'],
      [4, 'invalid_method', 'method'],
      [5, 'mismatched_endpoint', 'url'],
      [6, 'model_not_found', 'body.model'],
      [7, 'invalid_json_line', null],
      [8, 'missing_required_parameter', 'custom_id'],
    ]);
    expect(check.errors[1].message).toBe("Line 3: custom_id 'a' is used by an earlier line");
  });

  it('refuses an empty file, and stops reading past the line limit', async () => {
    expect((await checkBatchInput(file(['', '']), '/v1/chat/completions', known)).errors).toEqual([{ code: 'empty_file', message: 'The input file has no requests', line: 1, param: null }]);
    // Generated as it is read: the check never holds the file.
    let made = 0;
    const endless = Readable.from(
      (function* () {
        for (;;) yield `${line(`id-${made++}`)}\n`;
      })(),
    );
    const check = await checkBatchInput(endless, '/v1/chat/completions', known);
    expect(check.errors).toEqual([expect.objectContaining({ code: 'too_many_requests', line: MAX_BATCH_LINES + 1 })]);
    expect(made).toBeLessThan(MAX_BATCH_LINES + 1000);
  });

  it('names the endpoints a batch runs, with or without /v1', () => {
    expect(['/v1/chat/completions', '/chat/completions', '/v1/responses', '/embeddings', '/v1/images/generations', '/v1/audio', 42].map(batchEndpoint)).toEqual([
      '/v1/chat/completions',
      '/v1/chat/completions',
      '/v1/responses',
      '/v1/embeddings',
      '/v1/images/generations',
      undefined,
      undefined,
    ]);
  });
});
