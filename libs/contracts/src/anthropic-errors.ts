import type { AnthropicErrorBody } from './api-shapes';
import type { ErrorEnvelope } from './error-envelope';

/** The routes that answer in Anthropic's dialect (its SDK and Claude Code parse their errors). */
export const ANTHROPIC_ROUTE_PREFIX = '/api/anthropic/';

/** How a chat upstream's own 429 is worded: every upstream saturated, which Anthropic's clients know as 529. */
export const UPSTREAM_RATE_LIMITED = 'The model provider is rate limiting requests';

const BY_STATUS: Record<number, AnthropicErrorBody['error']['type']> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  408: 'timeout_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  504: 'timeout_error',
  529: 'overloaded_error',
};

/**
 * atelier's error envelope as Anthropic's, with the status Anthropic's clients expect: the type
 * from the status (4xx without a counterpart are invalid requests, 5xx api errors), and an
 * upstream's own rate limiting as 529 overloaded_error (Claude Code backs off and retries it).
 */
export function anthropicError(status: number, envelope: { error: Pick<ErrorEnvelope['error'], 'message'> }, requestId: string): { status: number; body: AnthropicErrorBody } {
  const saturated = status === 429 && envelope.error.message.startsWith(UPSTREAM_RATE_LIMITED);
  const code = saturated ? 529 : status;
  const type = BY_STATUS[code] ?? (code >= 500 ? 'api_error' : 'invalid_request_error');
  return { status: code, body: { type: 'error', error: { type, message: envelope.error.message }, request_id: requestId } };
}
