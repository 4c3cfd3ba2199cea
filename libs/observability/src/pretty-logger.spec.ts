import { PrettyLogger } from './json-logger';

/** What the logger writes to stdout while `fn` runs. */
function captured(fn: () => void): string {
  const original = process.stdout.write.bind(process.stdout);
  let out = '';
  process.stdout.write = ((chunk: string | Uint8Array) => {
    out += String(chunk);
    return true;
  }) as typeof process.stdout.write;
  try {
    fn();
  } finally {
    process.stdout.write = original;
  }
  return out;
}

describe('PrettyLogger (development logs)', () => {
  const access = { msg: 'GET /api/credits 200 3 ms', method: 'GET', route: '/api/credits', status: 200, ms: 3 };

  it('writes a request as one line, the message only', () => {
    const out = captured(() => new PrettyLogger('gateway', { logLevels: ['log', 'warn', 'error'], colors: false }).log(access, 'HTTP'));
    expect(out.trimEnd().split('\n')).toHaveLength(1);
    expect(out).toContain('GET /api/credits 200 3 ms');
    expect(out).not.toContain('route=');
  });

  it('adds the fields on the same line at debug', () => {
    const out = captured(() => new PrettyLogger('gateway', { logLevels: ['debug', 'log', 'warn', 'error'], colors: false }).log(access, 'HTTP'));
    expect(out.trimEnd().split('\n')).toHaveLength(1);
    expect(out).toContain('GET /api/credits 200 3 ms method=GET route=/api/credits status=200 ms=3');
  });

  it('leaves plain messages and objects without msg as Nest prints them', () => {
    const out = captured(() => new PrettyLogger('gateway', { logLevels: ['log'], colors: false }).log('Listening on 8080'));
    expect(out).toContain('Listening on 8080');
  });

  it("keeps Nest's start-up lines (modules, routes) for debug", () => {
    const quiet = captured(() => new PrettyLogger('gateway', { logLevels: ['log'], colors: false }).log('Mapped {/api/credits, GET} route', 'RouterExplorer'));
    expect(quiet).toBe('');
    const verbose = captured(() => new PrettyLogger('gateway', { logLevels: ['debug', 'log'], colors: false }).log('Mapped {/api/credits, GET} route', 'RouterExplorer'));
    expect(verbose).toContain('Mapped {/api/credits, GET} route');
  });
});
