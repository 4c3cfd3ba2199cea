import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Temporary links to stored blobs: `<base>/files/<key>?expires=<unix>&signature=<hmac>`.
 * The HMAC covers key and expiry, so a link cannot be extended or pointed elsewhere.
 */
export class SignedUrls {
  constructor(
    private readonly secret: string,
    private readonly baseUrl: string,
    private readonly ttlSeconds: number,
  ) {}

  private sign(key: string, expires: number): string {
    return createHmac('sha256', this.secret).update(`${key}\n${expires}`).digest('base64url');
  }

  url(key: string, now = Date.now()): string {
    const expires = Math.floor(now / 1000) + this.ttlSeconds;
    const path = key.split('/').map(encodeURIComponent).join('/');
    return `${this.baseUrl.replace(/\/$/, '')}/files/${path}?expires=${expires}&signature=${this.sign(key, expires)}`;
  }

  /** 'ok', or why the link must be refused. */
  verify(key: string, expires: unknown, signature: unknown, now = Date.now()): 'ok' | 'expired' | 'invalid' {
    if (typeof expires !== 'string' || typeof signature !== 'string' || !/^\d{1,12}$/.test(expires)) return 'invalid';
    const expected = Buffer.from(this.sign(key, Number(expires)));
    const given = Buffer.from(signature);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return 'invalid';
    if (Number(expires) * 1000 < now) return 'expired';
    return 'ok';
  }
}
