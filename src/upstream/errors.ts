// The upstream client's failures: one class, a registered code each (src/errors/errors.ts says what each means).
import { EarError } from '../errors/errors.js';

/** A failure of one request to an engine; what each code means: src/errors/errors.ts. */
export type UpstreamErrorCode =
  | 'EAR_ERR_UPSTREAM_CONNECT_TIMEOUT' | 'EAR_ERR_UPSTREAM_HEADERS_TIMEOUT' | 'EAR_ERR_UPSTREAM_BODY_TIMEOUT'
  | 'EAR_ERR_UPSTREAM_PROTOCOL' | 'EAR_ERR_UPSTREAM_CLOSED' | 'EAR_ERR_UPSTREAM_QUEUE_FULL'
  | 'EAR_ERR_UPSTREAM_POOL_CLOSED' | 'EAR_ERR_UPSTREAM_BAD_REQUEST';

export class UpstreamError extends EarError {
  declare readonly code: UpstreamErrorCode;
  constructor (code: UpstreamErrorCode, message: string) {
    super(code, message);
    this.name = 'UpstreamError';
  }
}

/** The engine was too slow (no head within upstreamHeadersTimeoutMs, or a gap in the body past upstreamBodyTimeoutMs). */
export function isUpstreamTimeout (error: unknown): boolean {
  return error instanceof UpstreamError && (error.code === 'EAR_ERR_UPSTREAM_HEADERS_TIMEOUT' || error.code === 'EAR_ERR_UPSTREAM_BODY_TIMEOUT');
}

/** What the caller controls of a request in flight. */
