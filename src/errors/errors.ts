// Every EAR_ERR_* code, as data: the HTTP status, the OpenAI error `type`, the Anthropic error `type`, and when
// it happens. One base class carries a code (as undici's errors do); a failure that needs fields of its own
// (QueueFullError's Retry-After, KubeApiError's API status) is a subclass where it is thrown. At an edge any thrown
// value becomes an answer through one function (openAiError): an EarError by its code, anything else as
// EAR_ERR_INTERNAL with nothing of it shown. docs/errors.md lists the codes; test/request/errors.test.ts checks
// that each is documented there and thrown somewhere in src/.
// No imports: src/core/ (no I/O, no gateway) and the worker threads load this file.

export type OpenAiErrorType =
  | 'invalid_request_error' | 'authentication_error' | 'not_found_error' | 'timeout_error' | 'rate_limit_error'
  | 'internal_error' | 'upstream_error' | 'service_unavailable';

/** Anthropic's error types (`{"type":"error","error":{"type",...}}`); overloaded_error is answered with 529. */
export type AnthropicErrorType =
  | 'invalid_request_error' | 'authentication_error' | 'permission_error' | 'not_found_error' | 'request_too_large'
  | 'rate_limit_error' | 'api_error' | 'overloaded_error';

export interface ErrorSpec {
  status: number;
  type: OpenAiErrorType;
  anthropic: AnthropicErrorType;
  /** When it happens, in one line. */
  when: string;
}

export const ERRORS = {
  // ---- the request's own faults ----
  EAR_ERR_BAD_JSON: { status: 400, type: 'invalid_request_error', anthropic: 'invalid_request_error', when: 'The request body is not valid JSON.' },
  EAR_ERR_BAD_REQUEST: { status: 400, type: 'invalid_request_error', anthropic: 'invalid_request_error', when: 'A field is missing or of the wrong type, the messages cannot be rendered, or an id is not valid percent-encoding.' },
  EAR_ERR_BAD_HEADER: { status: 400, type: 'invalid_request_error', anthropic: 'invalid_request_error', when: 'x-ear-priority names no class.' },
  EAR_ERR_UNAUTHORIZED: { status: 401, type: 'authentication_error', anthropic: 'authentication_error', when: 'The API key (or the admin token on /admin) is missing or wrong.' },
  EAR_ERR_NOT_FOUND: { status: 404, type: 'not_found_error', anthropic: 'not_found_error', when: 'No such route, or no such session under /admin/sessions.' },
  EAR_ERR_MODEL_NOT_FOUND: { status: 404, type: 'not_found_error', anthropic: 'not_found_error', when: 'No backend serves the model the request names.' },
  EAR_ERR_CONTEXT_NOT_FOUND: { status: 404, type: 'not_found_error', anthropic: 'not_found_error', when: 'The explicit context id does not exist (never created, deleted, or past its TTL).' },
  EAR_ERR_RESPONSE_NOT_FOUND: { status: 404, type: 'invalid_request_error', anthropic: 'not_found_error', when: 'previous_response_id names a response of another API key, one whose engine has left the fleet (engines keep stored responses in their own memory), or, with API keys on, one EAR has no record of.' },
  EAR_ERR_METHOD: { status: 405, type: 'invalid_request_error', anthropic: 'invalid_request_error', when: 'The route exists but not with this method.' },
  EAR_ERR_CLIENT_TIMEOUT: { status: 408, type: 'timeout_error', anthropic: 'invalid_request_error', when: 'The request body did not arrive within clientBodyTimeoutMs (stalled or trickling); the connection closes.' },
  EAR_ERR_BODY_TOO_LARGE: { status: 413, type: 'invalid_request_error', anthropic: 'request_too_large', when: 'The body (or its Content-Length) exceeds maxBodyBytes.' },
  EAR_ERR_HEADERS_TOO_LARGE: { status: 431, type: 'invalid_request_error', anthropic: 'request_too_large', when: 'The request head (request line and headers) exceeds maxHeaderBytes.' },
  EAR_ERR_UNSUPPORTED_ENCODING: { status: 415, type: 'invalid_request_error', anthropic: 'invalid_request_error', when: 'The body\'s content-encoding is not one EAR decodes (gzip, deflate, br, zstd).' },
  // ---- limits ----
  EAR_ERR_QUEUE_FULL: { status: 429, type: 'rate_limit_error', anthropic: 'overloaded_error', when: 'The admission queue (with Retry-After) or the route pool\'s queue is at its bound.' },
  EAR_ERR_RATE_LIMITED: { status: 429, type: 'rate_limit_error', anthropic: 'rate_limit_error', when: 'A rate limit of the client (rateLimits) refused it: its request bucket is empty, or its tokens per minute are in debt; Retry-After says when it is let in again.' },
  EAR_ERR_CONTEXTS_FULL: { status: 429, type: 'rate_limit_error', anthropic: 'rate_limit_error', when: 'maxContexts explicit contexts are live; a new one waits until one is deleted or expires.' },
  // ---- the gateway and its backends ----
  EAR_ERR_INTERNAL: { status: 500, type: 'internal_error', anthropic: 'api_error', when: 'A fault of the gateway itself; anything thrown that has no code is answered as this, without its details.' },
  EAR_ERR_UPSTREAM: { status: 502, type: 'upstream_error', anthropic: 'api_error', when: 'No backend could serve the request (connection failed or 5xx on every attempt), or one failed mid-response.' },
  EAR_ERR_NO_BACKEND: { status: 503, type: 'service_unavailable', anthropic: 'api_error', when: 'No healthy backend serves the model (or none among the endpoints the proxy allows).' },
  EAR_ERR_DRAINING: { status: 503, type: 'service_unavailable', anthropic: 'api_error', when: 'The process is shutting down: new requests, and those still waiting at drainTimeoutMs.' },
  EAR_ERR_STORE_UNAVAILABLE: { status: 503, type: 'service_unavailable', anthropic: 'api_error', when: 'With API keys on, the session store does not answer, so the owner of a previous_response_id cannot be checked; Retry-After: 1.' },
  EAR_ERR_OVERLOADED: { status: 503, type: 'service_unavailable', anthropic: 'overloaded_error', when: 'Every backend that serves the model has its connection queue full (upstreamMaxQueued); Retry-After: 1.' },
  EAR_ERR_UPSTREAM_TIMEOUT: { status: 504, type: 'upstream_error', anthropic: 'api_error', when: 'The last backend tried sent no answer in time, or stopped sending mid-response.' },
  EAR_ERR_QUEUE_TIMEOUT: { status: 504, type: 'timeout_error', anthropic: 'overloaded_error', when: 'The request waited for admission longer than queueTimeoutMs.' },
  // ---- the HTTP client to the engines: one request's failure, retried on another backend, then answered as
  //      EAR_ERR_UPSTREAM or EAR_ERR_UPSTREAM_TIMEOUT ----
  EAR_ERR_UPSTREAM_CONNECT_TIMEOUT: { status: 504, type: 'upstream_error', anthropic: 'api_error', when: 'No connection to the engine within the connect timeout.' },
  EAR_ERR_UPSTREAM_HEADERS_TIMEOUT: { status: 504, type: 'upstream_error', anthropic: 'api_error', when: 'The engine sent no response head within upstreamHeadersTimeoutMs.' },
  EAR_ERR_UPSTREAM_BODY_TIMEOUT: { status: 504, type: 'upstream_error', anthropic: 'api_error', when: 'The engine paused longer than upstreamBodyTimeoutMs between two reads of the body.' },
  EAR_ERR_UPSTREAM_PROTOCOL: { status: 502, type: 'upstream_error', anthropic: 'api_error', when: 'The engine broke HTTP/1.1 (bad status line, header or framing, or bytes nobody asked for).' },
  EAR_ERR_UPSTREAM_CLOSED: { status: 502, type: 'upstream_error', anthropic: 'api_error', when: 'The engine closed the connection before the response ended.' },
  EAR_ERR_UPSTREAM_QUEUE_FULL: { status: 503, type: 'service_unavailable', anthropic: 'overloaded_error', when: 'upstreamMaxQueued requests already wait for a connection to this backend.' },
  EAR_ERR_UPSTREAM_POOL_CLOSED: { status: 503, type: 'service_unavailable', anthropic: 'api_error', when: 'The backend\'s connection pool is closed (the backend left).' },
  EAR_ERR_UPSTREAM_BAD_REQUEST: { status: 400, type: 'invalid_request_error', anthropic: 'invalid_request_error', when: 'The request cannot be written upstream (a header with CR, LF or NUL).' },
  // ---- tokenizers and chat templates ----
  EAR_ERR_CHAT_TEMPLATE: { status: 400, type: 'invalid_request_error', anthropic: 'invalid_request_error', when: 'The chat template cannot render the messages (or the tokenizer has none).' },
  EAR_ERR_TOKEN_ID: { status: 400, type: 'invalid_request_error', anthropic: 'invalid_request_error', when: 'A token id outside the tokenizer\'s vocabulary.' },
  EAR_ERR_TOKENIZER_UNKNOWN: { status: 500, type: 'internal_error', anthropic: 'api_error', when: 'A tokenizer name (or remote: URL) that is not known; a configuration mistake.' },
  EAR_ERR_TOKENIZER_LOAD: { status: 500, type: 'internal_error', anthropic: 'api_error', when: 'Tokenizer files are missing or unreadable.' },
  // ---- start-up and background work: never a client's answer ----
  EAR_ERR_CONFIG: { status: 500, type: 'internal_error', anthropic: 'api_error', when: 'A configuration value breaks a rule (the message names the path and the rule); the process does not start.' },
  EAR_ERR_POD_ROWS_FULL: { status: 500, type: 'internal_error', anthropic: 'api_error', when: 'Every pod row is leased or still releasing: a backend cannot join until a release completes.' },
  EAR_ERR_KV_DECODE: { status: 500, type: 'internal_error', anthropic: 'api_error', when: 'An engine\'s KV-event message does not decode; it is counted and skipped.' },
  EAR_ERR_KUBE_API: { status: 500, type: 'internal_error', anthropic: 'api_error', when: 'The Kubernetes API answered a list with an error status, or a watch sent an ERROR event; discovery lists again.' },
  EAR_ERR_LEASE_API: { status: 500, type: 'internal_error', anthropic: 'api_error', when: 'The Lease API failed (unreachable, 5xx, 403, a timeout); leader election tries again.' },
  // ---- the simulator's engine (ear sim answers these in vLLM's shapes) ----
  EAR_ERR_ENGINE_QUEUE_FULL: { status: 503, type: 'service_unavailable', anthropic: 'overloaded_error', when: 'The simulated engine\'s waiting queue is full.' },
  EAR_ERR_CONTEXT_LENGTH: { status: 400, type: 'invalid_request_error', anthropic: 'invalid_request_error', when: 'The prompt with its max tokens exceeds the simulated engine\'s max_model_len; or, at the gateway, max_tokens alone reaches the max_model_len every engine of the model reports (vLLM\'s message), before anything is charged or sent.' },
  EAR_ERR_KV_CAPACITY: { status: 400, type: 'invalid_request_error', anthropic: 'invalid_request_error', when: 'The prompt with its max tokens needs more KV blocks than the simulated engine has.' }
} as const satisfies Record<`EAR_ERR_${string}`, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;

const kEarError = Symbol.for('ear.error.EarError');

export interface EarErrorOptions {
  cause?: unknown;
  /** Seconds the client should wait before trying again (a Retry-After header). */
  retryAfterSeconds?: number | null;
}

export class EarError extends Error {
  readonly code: ErrorCode;
  readonly retryAfterSeconds: number | null;
  readonly [kEarError] = true;

  constructor (code: ErrorCode, message: string, options?: EarErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'EarError';
    this.code = code;
    this.retryAfterSeconds = options?.retryAfterSeconds ?? null;
  }

  get status (): number {
    return ERRORS[this.code].status;
  }

  get type (): OpenAiErrorType {
    return ERRORS[this.code].type;
  }

  // `x instanceof EarError` holds across module copies (a test's import beside dist's), as undici's errors do;
  // a subclass is checked the ordinary way.
  static override [Symbol.hasInstance] (x: unknown): boolean {
    if (this !== EarError) return Function.prototype[Symbol.hasInstance].call(this, x);
    return typeof x === 'object' && x !== null && (x as Record<symbol, unknown>)[kEarError] === true;
  }
}

/** The code a thrown value answers with: its own if it is an EarError, EAR_ERR_INTERNAL for anything else. */
export function errorCodeOf (err: unknown): ErrorCode {
  return err instanceof EarError ? err.code : 'EAR_ERR_INTERNAL';
}

export interface ErrorResponse {
  status: number;
  body: string;
  headers: Array<[string, string]>;
}

/**
 * Any thrown value as the OpenAI-style answer, {"error":{"message","type","code"}}, with its content type and,
 * when the error gives one, Retry-After. Not an EarError: 500 EAR_ERR_INTERNAL, its message not shown (it may
 * hold paths or secrets).
 */
export function openAiError (err: unknown): ErrorResponse {
  const f = errorFields(err);
  return { status: f.spec.status, body: JSON.stringify({ error: { message: f.message, type: f.spec.type, code: f.code } }), headers: f.headers };
}

/** What every shape of answer is made of: the code (EAR_ERR_INTERNAL for anything else), its spec, the message shown, headers. */
export function errorFields (err: unknown): { code: ErrorCode; spec: ErrorSpec; message: string; headers: Array<[string, string]> } {
  const known = err instanceof EarError;
  const code = known ? err.code : 'EAR_ERR_INTERNAL';
  const headers: Array<[string, string]> = [['content-type', 'application/json']];
  // Whole seconds, at least 1 and at most a day, whatever a thrower computed (RFC 9110: delay-seconds).
  if (known && err.retryAfterSeconds !== null) headers.push(['retry-after', String(Math.min(Math.max(1, Math.ceil(err.retryAfterSeconds) || 1), 86_400))]);
  return { code, spec: ERRORS[code], message: known ? err.message : 'internal error', headers };
}

/** Any thrown value as the answer of the API a request speaks (`dialect.errors`: OpenAI's shape or Anthropic's). */
export function errorAnswer (dialect: { readonly errors: 'openai' | 'anthropic' } | null, err: unknown): ErrorResponse {
  return dialect?.errors === 'anthropic' ? anthropicError(err) : openAiError(err);
}

/**
 * Any thrown value as Anthropic's answer, {"type":"error","error":{"type","message"}}, for a client of its
 * Messages API: the same status as openAiError's except that overloaded_error is 529, as Anthropic answers it.
 */
export function anthropicError (err: unknown): ErrorResponse {
  const { spec, message, headers } = errorFields(err);
  const status = spec.anthropic === 'overloaded_error' ? 529 : spec.status;
  return { status, body: JSON.stringify({ type: 'error', error: { type: spec.anthropic, message } }), headers };
}
