/**
 * An AbortController that also aborts (with the same reason) when `parent` does; `unlink` stops
 * following it. What AbortSignal.any does for two signals, without the weak references and
 * finalization it registers per call and per listener, which showed in the hot path's profiles.
 */
export function abortFollowing(parent: AbortSignal): { controller: AbortController; unlink: () => void } {
  const controller = new AbortController();
  if (parent.aborted) {
    controller.abort(parent.reason);
    return { controller, unlink: () => undefined };
  }
  const follow = () => controller.abort(parent.reason);
  parent.addEventListener('abort', follow, { once: true });
  return { controller, unlink: () => parent.removeEventListener('abort', follow) };
}
