// uWebSockets.js response plumbing. The rules (docs/architecture.md#uwebsocketsjs): an HttpRequest is only
// valid inside its handler (read every header first); a response needs an abort handler before any async step
// and is dead once aborted or ended; writes from outside a uWS callback are corked; write() keeps the whole chunk
// and returns false under backpressure (wait for onWritable, never resend). A throw while writing (a header that
// cannot be written) is never let out to the caller (the upstream connection's read, a promise): the response is
// answered 500 if its head is not out yet, else its connection is closed, and the fault is reported (faults.ts).
import type { HttpResponse } from 'uWebSockets.js';
import { Gauge, type Registry } from 'prom-client';
import { EarError, errorAnswer, errorFields } from '../errors/errors.js';
import { reportFault } from '../request/faults.js';
import type { Dialect } from '../dialects/dialect.js';
import type { ClientLimits } from '../request/client-gate.js';
import { ReadDeadlines } from './read-deadlines.js';
import { bodyBuffer, joinBody, SHARED_BODY_MIN_BYTES } from '../request/body-buffer.js';

/**
 * What slow clients hold in this process, for /metrics and tests: bytes uWS took for responses in progress and
 * has not confirmed sent, and bytes of request bodies still being read.
 */
export const CLIENT_IO = { backpressureBytes: 0, bodyBytes: 0, backpressureCloses: 0 };

/** CLIENT_IO's figures as gauges of `registry`, read when scraped. */
export function registerClientIoMetrics (registry: Registry): void {
  new Gauge({ name: 'ear_client_backpressure_bytes', help: 'Bytes of responses in progress that uWS took and has not confirmed sent (clients reading slower than the engines write).', registers: [registry], collect () { this.set(CLIENT_IO.backpressureBytes); } });
  new Gauge({ name: 'ear_client_backpressure_closes_total', help: 'Responses closed because their client left more than MAX_HELD_BYTES unsent (a backstop; backpressure should keep this 0).', registers: [registry], collect () { this.set(CLIENT_IO.backpressureCloses); } });
  new Gauge({ name: 'ear_client_body_bytes', help: 'Bytes of request bodies still being received.', registers: [registry], collect () { this.set(CLIENT_IO.bodyBytes); } });
}

/**
 * A response whose unsent bytes pass this is closed. Backpressure pauses the upstream after each write uWS could
 * not send, so a response holds about one upstream read (64 KiB); the largest single write is a non-streamed
 * body turned into a stream at 16 MiB. Past twice that the client has stopped draining: a backstop.
 */
export const MAX_HELD_BYTES = 32 << 20;

/** Per-response state that outlives the handler. */
export class ResponseState {
  aborted = false;
  ended = false;
  /** Status line and headers are out: from here on an error can only end the stream. */
  headersSent = false;
  /** The status sent to the client (0 until the head is out). */
  status = 0;
  /** The API the client speaks (its errors' shape); null: OpenAI's. */
  dialect: Dialect | null = null;
  /** Called once if the client goes away (cancels the upstream request); a field, not an AbortController, to spare one a request. */
  onAbort: (() => void) | null = null;
  /**
   * Headers every answer carries besides its own, read when its head goes out (a limited client's rate-limit
   * headers, which then say what is left as the response starts); null: none.
   */
  extraHeaders: (() => Iterable<[string, string]>) | null = null;
  /** The request's id, for the report of a fault met while writing its answer ('' when not known). */
  requestId = '';
  #writable: (() => void) | null = null;
  /**
   * Bytes written since the last write() that reported no backpressure: an upper bound (give or take uWS's 16 KiB
   * cork buffer) of what uWS holds unsent for this response. Counted in CLIENT_IO until the response ends.
   */
  #held = 0;

  constructor (readonly res: HttpResponse) {
    res.onAborted(() => {
      this.aborted = true;
      this.#release();
      const a = this.onAbort;
      this.onAbort = null;
      a?.();
      this.#writable = null;
    });
  }

  /** Bytes uWS may hold unsent for this response (see #held). */
  get heldBytes (): number {
    return this.#held;
  }

  #release (): void {
    CLIENT_IO.backpressureBytes -= this.#held;
    this.#held = 0;
  }

  get live (): boolean {
    return !this.aborted && !this.ended;
  }

  /** Writes the status and headers (once). */
  head (status: number, headers: Iterable<[string, string]>): void {
    if (!this.live || this.headersSent) return;
    const lines = this.#lines(headers);
    if (lines === null) return;
    this.#guard(() => { this.res.cork(() => { this.#head(status, lines); }); });
  }

  #head (status: number, lines: ReadonlyArray<[string, string]>): void {
    this.res.writeStatus(statusLine(status));
    for (const [k, v] of lines) this.res.writeHeader(k, v);
    this.headersSent = true;
    this.status = status;
  }

  /**
   * `headers` and the extra ones, all computed before anything is written: a throw here (a header that cannot be
   * made) leaves nothing half-written, and the answer becomes a 500 (null returned: it is sent).
   */
  #lines (headers: Iterable<[string, string]>): Array<[string, string]> | null {
    try {
      const out = [...headers];
      if (this.extraHeaders !== null) for (const h of this.extraHeaders()) out.push(h);
      return out;
    } catch (err) {
      this.extraHeaders = null;
      reportFault(err, 'response-write', this.requestId || null);
      const { status, body, headers: own } = errorAnswer(this.dialect, new EarError('EAR_ERR_INTERNAL', 'internal error'));
      this.send(status, body, this.requestId === '' ? own : [...own, ['x-request-id', this.requestId]]);
      return null;
    }
  }

  /**
   * Runs a write into uWS; a throw in it ends the response: its connection is closed (what was written of it
   * cannot be taken back), onAborted follows (the upstream request is cancelled), and the fault is reported.
   */
  #guard (write: () => void): void {
    try {
      write();
    } catch (err) {
      reportFault(err, 'response-write', this.requestId || null);
      this.ended = true;
      this.#release();
      try {
        this.res.close();
      } catch {
        // Already closed by uWS.
      }
    }
  }

  /**
   * Writes the status and headers if not sent yet, then `data`, then ends the response if `end`: all under one
   * cork, so one send. Returns false under backpressure: the data is kept; wait for whenWritable before more.
   */
  stream (status: number, headers: Iterable<[string, string]>, data: Uint8Array | undefined, end: boolean): boolean {
    if (!this.live) return true;
    const lines = this.headersSent ? null : this.#lines(headers);
    if (!this.live) return true; // #lines answered 500: the headers could not be made
    let ok = true;
    this.#guard(() => {
      this.res.cork(() => {
        if (!this.headersSent) this.#head(status, lines!);
        if (data) ok = this.res.write(data);
        if (end) {
          this.ended = true;
          this.res.end();
        }
      });
    });
    if (!this.live && !this.ended) return true;
    if (this.ended) {
      this.#release();
    } else if (ok) {
      this.#release(); // uWS sent everything it held
    } else if (data) {
      this.#held += data.length;
      CLIENT_IO.backpressureBytes += data.length;
      if (this.#held > MAX_HELD_BYTES) {
        // The client stopped draining: close it (onAborted runs now and aborts the upstream request).
        CLIENT_IO.backpressureCloses++;
        this.res.close();
      }
    }
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
    this.#release();
    this.#guard(() => { this.res.cork(() => { this.res.end(body); }); });
  }

  /** A complete response with a body; `close` closes the connection after it (uWS adds `Connection: close`). */
  send (status: number, body: string | Uint8Array, headers: Iterable<[string, string]> = [], close = false): void {
    if (!this.live) return;
    const lines = this.#lines(headers);
    if (lines === null) return;
    this.ended = true;
    this.status = status;
    this.#release();
    this.#guard(() => {
      this.res.cork(() => {
        this.res.writeStatus(statusLine(status));
        for (const [k, v] of lines) this.res.writeHeader(k, v);
        this.res.end(body, close);
      });
    });
    this.headersSent = true;
  }

  /**
   * Answers with an error in the shape of the client's API (openAiError or anthropicError: status, body,
   * Retry-After) if nothing was sent yet, with `headers` too; otherwise ends the stream with an error event. A
   * header in `headers` replaces the error's own of that name (server.ts passes its Retry-After still).
   */
  fail (err: unknown, headers: ReadonlyArray<[string, string]> = [], close = false): void {
    if (!this.live) return;
    const anthropic = this.dialect?.errors === 'anthropic';
    const { status, body, headers: own } = errorAnswer(this.dialect, err);
    if (!this.headersSent) {
      this.send(status, body, [...own, ...headers], close);
      return;
    }
    // Mid-stream: engines send errors in-band, each API in its own event; do the same.
    if (anthropic) this.end(`event: error\ndata: ${body}\n\n`);
    else if (this.dialect?.stream.name === 'responses') this.end(`event: error\ndata: ${responsesErrorEvent(err)}\n\n`);
    else this.end(`data: ${body}\n\ndata: [DONE]\n\n`);
  }
}

/**
 * A limited client's every answer (errors and streams too) carries its rate-limit headers: OpenAI's names
 * (x-ratelimit-*) on every API, Anthropic's (anthropic-ratelimit-*) too on Anthropic's, so a client of either SDK
 * reads its own. The headers say what is left when the answer's head goes out. Given to accept's admitClient.
 */
export function limitHeadersOn (rs: ResponseState, clock: () => number): (limits: ClientLimits) => void {
  return (limits) => {
    rs.extraHeaders = () => {
      const openai = limits.headers('openai', clock());
      return rs.dialect?.errors === 'anthropic' ? [...openai, ...limits.headers('anthropic', clock())] : openai;
    };
  };
}

/** The Responses API's in-band error event: {"type":"error","code","message","param"}. */
function responsesErrorEvent (err: unknown): string {
  const { code, message } = errorFields(err);
  return JSON.stringify({ type: 'error', code, message, param: null });
}

const REASONS: Record<number, string> = {
  200: 'OK', 201: 'Created', 204: 'No Content', 400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found',
  405: 'Method Not Allowed', 408: 'Request Timeout', 409: 'Conflict', 413: 'Payload Too Large', 415: 'Unsupported Media Type', 422: 'Unprocessable Entity',
  429: 'Too Many Requests', 431: 'Request Header Fields Too Large', 500: 'Internal Server Error', 502: 'Bad Gateway', 503: 'Service Unavailable', 504: 'Gateway Timeout', 529: 'Overloaded'
};

export function statusLine (status: number): string {
  return `${status} ${REASONS[status] ?? 'Status'}`;
}

/** What readBody enforces (GatewayConfig's fields of the same names). */
export interface BodyLimits {
  maxBodyBytes: number;
  clientBodyTimeoutMs: number;
}

const bodyDeadlines = new ReadDeadlines();

/**
 * Reads the request body, at most `maxBodyBytes`, within `clientBodyTimeoutMs`. uWS neuters each chunk when the
 * callback returns, so chunks are copied. `declaredLength` is the request's Content-Length header (read by the
 * handler: uWS's request object is gone after it returns): a body declared larger is refused with 413 at once,
 * from the header alone as nginx does, instead of reading up to the bound or waiting for bytes that a client
 * declared but never sends. Over the limit (413), or past the deadline (408: a client that stalls or trickles),
 * the request is answered at once (through `fail`: the door counts its refusals) and the bytes read so far are
 * dropped; a 408 also closes the connection.
 * uWS itself closes, unanswered, a body slower than about 16 KB/s (measured: 10 KB/s closed at 11.5 s, 16 KB/s
 * at 19.5 s, 640 KB/s still open at 25 s); the deadline bounds the faster ones and answers sooner if set lower.
 */
export function readBody (state: ResponseState, limits: Readonly<BodyLimits>, done: (body: Buffer) => void, declaredLength = '',
  fail: (err: EarError, headers: ReadonlyArray<[string, string]>, close: boolean) => void = (err, headers, close) => state.fail(err, headers, close)): void {
  const maxBytes = limits.maxBodyBytes;
  if (declaredLength !== '') {
    const n = Number(declaredLength);
    if (/^[0-9]+$/.test(declaredLength.trim()) && n > maxBytes) {
      fail(new EarError('EAR_ERR_BODY_TOO_LARGE', `request body of ${declaredLength.trim()} bytes (Content-Length) exceeds ${maxBytes} bytes`), [['connection', 'close']], false);
      return;
    }
  }
  let chunks: Buffer[] = [];
  let size = 0;
  let over = false;
  // A body declared by Content-Length and longer than one chunk, or of SHARED_BODY_MIN_BYTES in one chunk, is copied
  // once, into a buffer of its size (bodyBuffer), not chunk by chunk and then again by Buffer.concat (two copies and
  // their garbage for a 130 KB turn).
  const declared = declaredLength === '' ? -1 : Number(declaredLength);
  let whole: Buffer | null = null;
  /** Stops reading: the deadline, the abort hook and the bytes kept so far go. */
  const stop = (): void => {
    over = true;
    bodyDeadlines.clear(deadline);
    if (state.onAbort === stop) state.onAbort = null;
    CLIENT_IO.bodyBytes -= size;
    chunks = [];
    whole = null;
  };
  const deadline = bodyDeadlines.add(limits.clientBodyTimeoutMs, () => {
    if (over) return;
    const got = size;
    stop();
    fail(new EarError('EAR_ERR_CLIENT_TIMEOUT', `the request body did not arrive within ${limits.clientBodyTimeoutMs} ms (${got} bytes came)`), [], true);
  });
  // The client may leave mid-body: nothing else holds this response yet.
  state.onAbort = stop;
  state.res.onData((ab, isLast) => {
    if (over) return;
    if (size + ab.byteLength > maxBytes) {
      stop();
      fail(new EarError('EAR_ERR_BODY_TOO_LARGE', `request body exceeds ${maxBytes} bytes`), [['connection', 'close']], false);
      return;
    }
    const at = size;
    size += ab.byteLength;
    CLIENT_IO.bodyBytes += ab.byteLength;
    if (at === 0) {
      const total = isLast ? size : declared;
      if (Number.isSafeInteger(total) && total >= size && (!isLast || size >= SHARED_BODY_MIN_BYTES)) whole = bodyBuffer(total);
    }
    if (whole !== null && size <= whole.length) whole.set(new Uint8Array(ab), at);
    else {
      if (whole !== null) {
        // More than declared (uWS frames by Content-Length, so not expected): back to chunks.
        chunks.push(whole.subarray(0, at));
        whole = null;
      }
      // Copied into Node's pooled slab (small bodies), not a fresh malloc'd ArrayBuffer per chunk as ab.slice() made.
      chunks.push(Buffer.from(new Uint8Array(ab)));
    }
    if (isLast) {
      const body = whole !== null ? whole.subarray(0, size) : chunks.length === 1 && size < SHARED_BODY_MIN_BYTES ? chunks[0] : joinBody(chunks, size);
      stop();
      done(body);
    }
  });
}
