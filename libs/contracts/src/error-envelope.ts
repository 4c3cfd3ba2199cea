/**
 * The one error body every atelier endpoint returns. `message` duplicates the human text so
 * the OpenAI SDK (which reads error.message) shows it; `status_message` mirrors `type`
 * because the spec's queue 404 body carries it.
 */
export interface ErrorEnvelope {
  error: { type: ErrorType; title: string; message: string; detail?: unknown };
  status: 'error';
  status_message: ErrorType;
}

export const ERROR_TYPES = {
  invalid_request: { status: 400, title: 'The request is invalid' },
  authentication_required: { status: 401, title: 'Authentication is required' },
  insufficient_credits: { status: 402, title: 'Insufficient credits' },
  budget_exceeded: { status: 402, title: 'Budget exceeded' },
  permission_denied: { status: 403, title: 'Permission denied' },
  resource_not_found: { status: 404, title: 'The requested resource could not be found' },
  route_not_found: { status: 404, title: 'The requested route does not exist' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  conflict: { status: 409, title: 'The resource already exists' },
  idempotency_key_in_use: { status: 409, title: 'A request with this Idempotency-Key is still running' },
  invalid_state: { status: 409, title: 'The resource is not in a state that allows this' },
  payload_too_large: { status: 413, title: 'The request body is too large' },
  unsupported_media_type: { status: 415, title: 'Unsupported content type' },
  unprocessable_entity: { status: 422, title: 'The request cannot be processed' },
  idempotency_key_reused: { status: 422, title: 'This Idempotency-Key was used for a different request' },
  rate_limited: { status: 429, title: 'Too many requests' },
  headers_too_large: { status: 431, title: 'The request line or headers are too large' },
  request_timeout: { status: 408, title: 'The request did not arrive in time' },
  internal_error: { status: 500, title: 'Internal server error' },
  upstream_error: { status: 502, title: 'The model provider failed' },
  service_unavailable: { status: 503, title: 'Service unavailable' },
  timeout: { status: 504, title: 'The request timed out' },
} as const satisfies Record<string, { status: number; title: string }>;

export type ErrorType = keyof typeof ERROR_TYPES;

/** Thrown anywhere in atelier to produce a specific envelope; the HTTP filter renders it. */
export class ApiError extends Error {
  readonly status: number;
  readonly title: string;

  constructor(
    readonly type: ErrorType,
    message: string,
    readonly detail?: unknown,
  ) {
    super(message);
    this.name = 'ApiError';
    this.status = ERROR_TYPES[type].status;
    this.title = ERROR_TYPES[type].title;
  }

  toEnvelope(): ErrorEnvelope {
    return errorEnvelope(this.type, this.message, this.detail);
  }

  static badRequest(message: string, detail?: unknown) {
    return new ApiError('invalid_request', message, detail);
  }
  static notFound(message: string = ERROR_TYPES.resource_not_found.title) {
    return new ApiError('resource_not_found', message);
  }
  static forbidden(message: string) {
    return new ApiError('permission_denied', message);
  }
  static unauthorized(message: string) {
    return new ApiError('authentication_required', message);
  }
  static conflict(message: string) {
    return new ApiError('conflict', message);
  }
  static insufficientCredits(message: string, detail?: unknown) {
    return new ApiError('insufficient_credits', message, detail);
  }
}

export function errorEnvelope(type: ErrorType, message: string, detail?: unknown): ErrorEnvelope {
  const error: ErrorEnvelope['error'] = { type, title: ERROR_TYPES[type].title, message };
  if (detail !== undefined) error.detail = detail;
  return { error, status: 'error', status_message: type };
}

/** Ids of atelier resources (generations, fine-tunes); anything else is simply not found. */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
