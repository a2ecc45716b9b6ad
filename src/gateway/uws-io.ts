// uWebSockets.js response plumbing. The rules (STYLE.md §3): an HttpRequest is only valid inside its handler
// (read every header first); a response needs an abort handler before any async step and is dead once aborted
// or ended; writes from outside a uWS callback are corked; write() keeps the whole chunk and returns false
// under backpressure (wait for onWritable, never resend).
import type { HttpResponse } from 'uWebSockets.js';
import { errorBody, GatewayError } from './errors.js';

/** Per-response state that outlives the handler. */
export class ResponseState {
  aborted = false;
  ended = false;
  /** Status line and headers are out: from here on an error can only end the stream. */
  headersSent = false;
  /** Called once if the client goes away (cancels the upstream request); a field, not an AbortController, to spare one a request. */
  onAbort: (() => void) | null = null;
  #writable: (() => void) | null = null;

  constructor (readonly res: HttpResponse) {
    res.onAborted(() => {
      this.aborted = true;
      const a = this.onAbort;
      this.onAbort = null;
      a?.();
      this.#writable = null;
    });
  }

  get live (): boolean {
    return !this.aborted && !this.ended;
  }

  /** Writes the status and headers (once). */
  head (status: number, headers: Iterable<[string, string]>): void {
    if (!this.live || this.headersSent) return;
    this.res.cork(() => { this.#head(status, headers); });
  }

  #head (status: number, headers: Iterable<[string, string]>): void {
    this.res.writeStatus(statusLine(status));
    for (const [k, v] of headers) this.res.writeHeader(k, v);
    this.headersSent = true;
  }

  /**
   * Writes the status and headers if not sent yet, then `data`, then ends the response if `end`: all under one
   * cork, so one send. Returns false under backpressure: the data is kept; wait for whenWritable before more.
   */
  stream (status: number, headers: Iterable<[string, string]>, data: Uint8Array | undefined, end: boolean): boolean {
    if (!this.live) return true;
    let ok = true;
    this.res.cork(() => {
      if (!this.headersSent) this.#head(status, headers);
      if (data) ok = this.res.write(data);
      if (end) {
        this.ended = true;
        this.res.end();
      }
    });
    return ok;
  }

  /** Calls `fn` once when the socket can take more (never if the client goes away first). */
  whenWritable (fn: () => void): void {
    if (!this.live) return;
    // One onWritable per response at a time (uWebSockets.js#961): this one calls back and unregisters itself.
    this.#writable = fn;
    this.res.onWritable(() => {
      const w = this.#writable;
      this.#writable = null;
      w?.();
      return true;
    });
  }

  end (body?: string | Uint8Array): void {
    if (!this.live) return;
    this.ended = true;
    this.res.cork(() => { this.res.end(body); });
  }

  /** A complete response with a body. */
  send (status: number, body: string | Uint8Array, headers: Iterable<[string, string]> = []): void {
    if (!this.live) return;
    this.ended = true;
    this.res.cork(() => {
      this.res.writeStatus(statusLine(status));
      for (const [k, v] of headers) this.res.writeHeader(k, v);
      this.res.end(body);
    });
    this.headersSent = true;
  }

  /** Answers with an OpenAI-style error if nothing was sent yet; otherwise ends the stream with an error event. */
  fail (err: unknown, headers: Iterable<[string, string]> = []): void {
    if (!this.live) return;
    const { status, body } = errorBody(err);
    if (!this.headersSent) {
      this.send(status, body, [['content-type', 'application/json'], ...headers]);
      return;
    }
    // Mid-stream: engines send errors in-band as an SSE data line, then [DONE]; do the same.
    this.end(`data: ${body}\n\ndata: [DONE]\n\n`);
  }
}

const REASONS: Record<number, string> = {
  200: 'OK', 201: 'Created', 204: 'No Content', 400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found',
  405: 'Method Not Allowed', 408: 'Request Timeout', 409: 'Conflict', 413: 'Payload Too Large', 422: 'Unprocessable Entity',
  429: 'Too Many Requests', 500: 'Internal Server Error', 502: 'Bad Gateway', 503: 'Service Unavailable', 504: 'Gateway Timeout'
};

export function statusLine (status: number): string {
  return `${status} ${REASONS[status] ?? 'Status'}`;
}

/**
 * Reads the request body up to `maxBytes`. uWS neuters each chunk when the callback returns, so chunks are
 * copied. Over the limit, the request is answered 413 at once and the rest is ignored.
 */
/**
 * Reads the request body, at most `maxBytes`. `declaredLength` is the request's Content-Length header (read by
 * the handler: uWS's request object is gone after it returns): a body declared larger is refused with 413 at
 * once, from the header alone as nginx does, instead of reading up to the bound or waiting for bytes that a
 * client declared but never sends.
 */
export function readBody (state: ResponseState, maxBytes: number, done: (body: Buffer) => void, declaredLength = ''): void {
  if (declaredLength !== '') {
    const n = Number(declaredLength);
    if (/^[0-9]+$/.test(declaredLength.trim()) && n > maxBytes) {
      state.fail(new GatewayError('EAR_ERR_BODY_TOO_LARGE', `request body of ${declaredLength.trim()} bytes (Content-Length) exceeds ${maxBytes} bytes`), [['connection', 'close']]);
      return;
    }
  }
  const chunks: Buffer[] = [];
  let size = 0;
  let over = false;
  state.res.onData((ab, isLast) => {
    if (over) return;
    size += ab.byteLength;
    if (size > maxBytes) {
      over = true;
      state.fail(new GatewayError('EAR_ERR_BODY_TOO_LARGE', `request body exceeds ${maxBytes} bytes`), [['connection', 'close']]);
      return;
    }
    // Copied into Node's pooled slab (small bodies), not a fresh malloc'd ArrayBuffer per chunk as ab.slice() made.
    chunks.push(Buffer.from(new Uint8Array(ab)));
    if (isLast) done(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
  });
}
