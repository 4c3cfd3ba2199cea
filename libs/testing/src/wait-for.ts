/**
 * Polls until `check` returns a value other than undefined/false, or fails with what it was
 * waiting for. Tests wait on observable state with this, never with fixed sleeps.
 */
export async function waitFor<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  { timeoutMs = 10_000, intervalMs = 25, description = 'condition' } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value as T;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline)
      throw new Error(`Timed out after ${timeoutMs} ms waiting for ${description}${lastError ? `: ${(lastError as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * Resolves once Date.now() has moved past the millisecond it was called in: what is made after
 * it carries a later millisecond than what was made before (time-ordered ids).
 */
export async function nextMillisecond(): Promise<void> {
  const now = Date.now();
  while (Date.now() <= now) await new Promise((r) => setTimeout(r, 1));
}
