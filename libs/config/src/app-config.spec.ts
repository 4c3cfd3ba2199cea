import { randomBytes } from 'node:crypto';
import { ConfigError, parseConfig } from './app-config';

function configError(env: Record<string, string | undefined>): ConfigError {
  try {
    parseConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected parseConfig to throw');
}

describe('parseConfig', () => {
  it('fills in the documented defaults for an empty environment', () => {
    const config = parseConfig({});
    expect(config.PORT).toBe(8080);
    expect(config.BODY_LIMIT_BYTES).toBe(32 * 1024 * 1024);
    expect(config.REDIS_PREFIX).toBe('atelier');
    expect(config.NODE_ENV).toBe('development');
    expect(config.ADMIN_TOKEN).toBeUndefined();
  });

  it('refuses to run in production with a short, default or placeholder ADMIN_TOKEN or URL_SIGNING_SECRET, naming the variable', () => {
    const strong = { NODE_ENV: 'production', URL_SIGNING_SECRET: randomBytes(32).toString('hex'), ADMIN_TOKEN: randomBytes(32).toString('hex'), METRICS_PORT: '9464' };
    expect(() => parseConfig(strong)).not.toThrow();
    for (const [name, value, reason] of [
      ['ADMIN_TOKEN', 'change-me-admin-token', /ADMIN_TOKEN: is a published default or placeholder/],
      ['URL_SIGNING_SECRET', 'change-me-url-signing-secret', /URL_SIGNING_SECRET: is a published default or placeholder/],
      ['URL_SIGNING_SECRET', 'atelier-dev-insecure-url-signing-secret', /URL_SIGNING_SECRET: is a published default/],
      ['ADMIN_TOKEN', 'dev-admin-token-change-me', /ADMIN_TOKEN: is a published default/],
      ['ADMIN_TOKEN', 'a-sixteen-char-token', /ADMIN_TOKEN: must be at least 32 characters in production/],
      ['URL_SIGNING_SECRET', 'ab'.repeat(20), /URL_SIGNING_SECRET: has too few distinct characters/],
    ] as const)
      expect(configError({ ...strong, [name]: value }).message).toMatch(reason);
    // Metrics name namespaces: production serves them on their own port or behind a token.
    expect(configError({ ...strong, METRICS_PORT: undefined }).message).toMatch(/METRICS_PORT: production needs METRICS_PORT \(metrics on a port of their own\) or METRICS_TOKEN/);
    expect(() => parseConfig({ ...strong, METRICS_PORT: undefined, METRICS_TOKEN: randomBytes(32).toString('hex') })).not.toThrow();
    // Outside production the same values are a developer's business.
    expect(() => parseConfig({ ADMIN_TOKEN: 'change-me-admin-token', URL_SIGNING_SECRET: 'change-me-url-signing-secret' })).not.toThrow();
  });

  it('trusts no X-Forwarded-* unless TRUST_PROXY says whom: off, a hop count, or proxy addresses', () => {
    expect(parseConfig({}).TRUST_PROXY).toBe(false);
    expect(parseConfig({ TRUST_PROXY: '1' }).TRUST_PROXY).toBe(1);
    expect(parseConfig({ TRUST_PROXY: '10.0.0.0/8, 127.0.0.1' }).TRUST_PROXY).toEqual(['10.0.0.0/8', '127.0.0.1']);
    expect(configError({ TRUST_PROXY: 'true' }).message).toMatch(/TRUST_PROXY: must be off, a hop count, or addresses\/CIDRs of trusted proxies \(not true\)/);
  });

  it('coerces numeric variables from strings', () => {
    const config = parseConfig({ PORT: '9000', AUTH_CACHE_MS: '250', BODY_LIMIT_BYTES: '1024' });
    expect(config).toMatchObject({ PORT: 9000, AUTH_CACHE_MS: 250, BODY_LIMIT_BYTES: 1024 });
  });

  it('treats an empty string as unset, so `FOO=` falls back to the default', () => {
    const config = parseConfig({ PORT: '', REDIS_PREFIX: '', DATABASE_URL: '', ADMIN_TOKEN: '' });
    expect(config.PORT).toBe(8080);
    expect(config.REDIS_PREFIX).toBe('atelier');
    expect(config.DATABASE_URL).toBe('postgresql://postgres@127.0.0.1:5432/atelier');
    expect(config.ADMIN_TOKEN).toBeUndefined();
  });

  it('reports every bad variable by name in one ConfigError', () => {
    const err = configError({ DATABASE_URL: 'mysql://localhost/atelier', PORT: 'abc', AUTH_CACHE_MS: '5000' });
    expect(err.problems).toHaveLength(3);
    for (const name of ['DATABASE_URL', 'PORT', 'AUTH_CACHE_MS']) {
      expect(err.message).toContain(name);
      expect(err.problems.some((p) => p.startsWith(`${name}:`))).toBe(true);
    }
    // Variables that were fine are not blamed.
    expect(err.message).not.toContain('REDIS_URL');
  });

  it('gives V8 100 % old-generation headroom unless told otherwise, 0 leaving V8 its own choice', () => {
    expect(parseConfig({}).V8_HEAP_GROWING_PERCENT).toBe(100);
    expect(parseConfig({ V8_HEAP_GROWING_PERCENT: '0' }).V8_HEAP_GROWING_PERCENT).toBe(0);
    expect(configError({ V8_HEAP_GROWING_PERCENT: '401' }).problems).toEqual([expect.stringMatching(/^V8_HEAP_GROWING_PERCENT: /)]);
    expect(configError({ V8_HEAP_GROWING_PERCENT: '1.5' }).problems).toEqual([expect.stringMatching(/^V8_HEAP_GROWING_PERCENT: /)]);
  });

  it('rejects a single bad variable with its name and the reason', () => {
    const err = configError({ REDIS_URL: 'http://127.0.0.1:6379' });
    expect(err.problems).toEqual([expect.stringMatching(/^REDIS_URL: .*redis:\/\//)]);
  });
});
