// Errors the gateway answers with, as data: a stable code, the HTTP status, and the OpenAI error type.
// At the edge every one becomes {"error":{"message","type","code"}} (the shape OpenAI clients parse).

export interface ErrorSpec {
  status: number;
  type: string;
}

export const ERRORS = {
  EAR_ERR_BAD_JSON: { status: 400, type: 'invalid_request_error' },
  EAR_ERR_BAD_REQUEST: { status: 400, type: 'invalid_request_error' },
  EAR_ERR_BAD_HEADER: { status: 400, type: 'invalid_request_error' },
  EAR_ERR_UNAUTHORIZED: { status: 401, type: 'authentication_error' },
  EAR_ERR_NOT_FOUND: { status: 404, type: 'not_found_error' },
  EAR_ERR_MODEL_NOT_FOUND: { status: 404, type: 'not_found_error' },
  /** An explicit context id that does not exist (never created, deleted, or past its TTL). */
  EAR_ERR_CONTEXT_NOT_FOUND: { status: 404, type: 'not_found_error' },
  EAR_ERR_METHOD: { status: 405, type: 'invalid_request_error' },
  /** The client did not send its whole request body within clientBodyTimeoutMs (stalled or trickling). */
  EAR_ERR_CLIENT_TIMEOUT: { status: 408, type: 'timeout_error' },
  EAR_ERR_BODY_TOO_LARGE: { status: 413, type: 'invalid_request_error' },
  EAR_ERR_QUEUE_FULL: { status: 429, type: 'rate_limit_error' },
  /** The client's token bucket (rateLimits) is empty: Retry-After says when it holds one again. */
  EAR_ERR_RATE_LIMITED: { status: 429, type: 'rate_limit_error' },
  /** maxContexts explicit contexts are live: a new one waits until one is deleted or expires. */
  EAR_ERR_CONTEXTS_FULL: { status: 429, type: 'rate_limit_error' },
  EAR_ERR_INTERNAL: { status: 500, type: 'internal_error' },
  EAR_ERR_UPSTREAM: { status: 502, type: 'upstream_error' },
  EAR_ERR_NO_BACKEND: { status: 503, type: 'service_unavailable' },
  EAR_ERR_DRAINING: { status: 503, type: 'service_unavailable' },
  /** Every backend that could serve it has its connection pool's queue full (upstreamMaxQueued). */
  EAR_ERR_OVERLOADED: { status: 503, type: 'service_unavailable' },
  EAR_ERR_UPSTREAM_TIMEOUT: { status: 504, type: 'upstream_error' },
  /** The request waited for admission longer than queueTimeoutMs. */
  EAR_ERR_QUEUE_TIMEOUT: { status: 504, type: 'timeout_error' }
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;

const kGatewayError = Symbol.for('ear.error.GatewayError');

export class GatewayError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly type: string;
  readonly [kGatewayError] = true;

  /** Seconds the client should wait before trying again (a Retry-After header), when it applies. */
  readonly retryAfterSeconds: number | null;

  constructor (code: ErrorCode, message: string, options?: { cause?: unknown; retryAfterSeconds?: number }) {
    super(message, options);
    this.retryAfterSeconds = options?.retryAfterSeconds ?? null;
    this.name = 'GatewayError';
    this.code = code;
    this.status = ERRORS[code].status;
    this.type = ERRORS[code].type;
  }

  // instanceof across module copies and threads' realms, as undici does.
  static override [Symbol.hasInstance] (x: unknown): boolean {
    return typeof x === 'object' && x !== null && (x as Record<symbol, unknown>)[kGatewayError] === true;
  }
}

/** The OpenAI-style body for an error; anything that is not a GatewayError is an internal error with no details leaked. */
export function errorBody (err: unknown): { status: number; body: string } {
  const e = err instanceof GatewayError ? err : new GatewayError('EAR_ERR_INTERNAL', 'internal error');
  return { status: e.status, body: JSON.stringify({ error: { message: e.message, type: e.type, code: e.code } }) };
}
