import { randomFillSync } from 'node:crypto';

const POOL_BYTES = 4096;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let offset = POOL_BYTES;

/**
 * `bytes` cryptographically random bytes as base64url, drawn from a pool refilled 4 KiB at a
 * time: crypto.randomBytes asks the kernel on every call, which on the chat path was a
 * syscall per request (the way crypto.randomUUID already buffers its entropy).
 */
export function randomToken(bytes: number): string {
  if (bytes > POOL_BYTES) return randomFillSync(Buffer.allocUnsafe(bytes)).toString('base64url');
  if (offset + bytes > POOL_BYTES) {
    randomFillSync(pool);
    offset = 0;
  }
  const token = pool.toString('base64url', offset, offset + bytes);
  offset += bytes;
  return token;
}
