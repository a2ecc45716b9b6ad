// One upstream attempt: send the body to a backend through its UpstreamPool and stream the answer back through
// uWS with backpressure (the upstream socket is paused while uWS holds unsent bytes). The caller decides
// what to do with an attempt that failed before any byte reached the client (retry on the next-best backend).
// Everything one socket read brings (many SSE events) goes to the client in one uWS write, at the read's end.
// A throw in any of the attempt's callbacks (they run inside the upstream connection's read, which cannot answer
// the client) ends the attempt here: the client gets a 500 or its stream is ended, the upstream request is
// cancelled, the attempt settles as broken (its in-flight count and token charge are released by the pipeline),
// and the fault is reported.
import { isUpstreamTimeout, UpstreamError } from '../upstream/errors.js';
import { type UpstreamCall, type UpstreamHandler, type UpstreamPool } from '../upstream/pool.js';
import { EarError } from '../errors/errors.js';
import { StreamObserver } from '../upstream/stream-observer.js';
import { reportFault } from '../request/faults.js';
import type { ResponseState } from './uws-io.js';
import type { AttemptResult } from '../request/transport.js';
import { SpliceStream, type Splice } from '../resume/stream-resume.js';
import type { StreamTranscript } from '../resume/transcript.js';

export type { AttemptResult };

export interface AttemptOptions {
  path: string;
  body: Buffer;
  /** Headers sent upstream (host and content-length are added). */
  headers: ReadonlyArray<readonly [string, string]>;
  /** Headers added to the client's response (x-ear-backend, x-request-id). */
  responseHeaders: Array<[string, string]>;
  /** The last attempt forwards a 5xx as it is instead of asking for a retry. */
  final: boolean;
  observer: (contentType: string) => StreamObserver;
  /** Called once, when the first content token passes. */
  onFirstToken?: () => void;
  /** Largest non-streaming body buffered to send with a Content-Length; larger ones are streamed. */
  maxBufferedBytes?: number;
  /**
   * Keeps what the client gets of an SSE answer, which then goes out in whole events only, so that a stream cut
   * after its first byte can resume elsewhere ('cut'); null or absent: a cut ends the stream with an error event.
   */
  transcript?: StreamTranscript | null;
  /** A resumed leg: the client's head went out already; the engine's events are rewritten into its stream. */
  splice?: Splice | null;
}

export interface AttemptOutcome {
  result: AttemptResult;
  observer: StreamObserver | null;
}

export function attempt (state: ResponseState, pool: UpstreamPool, opts: AttemptOptions): Promise<AttemptOutcome> {
  return new Promise((resolve) => {
    pool.dispatch({ path: opts.path, method: 'POST', body: opts.body, headers: opts.headers }, new UpstreamAttempt(state, opts, resolve));
  });
}

const CLIENT_GONE = new Error('the client went away');
const WRITE_FAILED = new Error('the answer could not be written to the client');
const DEFAULT_MAX_BUFFERED = 16 << 20;

/** Where the body of the upstream's answer goes. */
const enum Mode { Drain, Buffer, Stream }

class UpstreamAttempt implements UpstreamHandler {
  #call: UpstreamCall | null = null;
  #settled = false;
  #status = 0;
  #head: Array<[string, string]> = [];
  #observer: StreamObserver | null = null;
  #mode = Mode.Drain;
  /** An SSE answer is observed a socket read at a time (in #write), any other as each chunk comes. */
  #sse = false;
  /**
   * Buffer mode: the whole body so far (copies). Stream mode: views of this socket read's buffer, written together
   * when the read ends (the client reuses that buffer for its next read).
   */
  #chunks: Buffer[] = [];
  #bytes = 0;
  /** uWS holds unsent bytes: the upstream is paused until the client socket drains. */
  #backpressure = false;
  readonly #transcript: StreamTranscript | null;
  readonly #splice: SpliceStream | null;
  /** With a transcript: the partial event at the end of the last read, held until its blank line comes. */
  #partial: Buffer | null = null;
  readonly #drained = (): void => {
    this.#backpressure = false;
    this.#call?.resume();
  };

  constructor (readonly state: ResponseState, readonly opts: AttemptOptions, readonly done: (o: AttemptOutcome) => void) {
    state.onAbort = () => this.#call?.abort(CLIENT_GONE);
    this.#transcript = opts.transcript ?? null;
    this.#splice = opts.splice == null ? null : new SpliceStream(opts.splice);
  }

  #settle (result: AttemptResult): void {
    if (this.#settled) return;
    this.#settled = true;
    if (this.state.onAbort) this.state.onAbort = null;
    this.done({ result, observer: this.#observer });
  }

  onStart (call: UpstreamCall): void {
    this.#call = call;
    if (this.state.aborted) call.abort(CLIENT_GONE);
  }

  /** Runs one of the upstream's callbacks; a throw in it ends the attempt (see the head of this file). */
  #safely<T> (fallback: T, fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      this.#fault(err);
      return fallback;
    }
  }

  #fault (err: unknown): void {
    reportFault(err, 'upstream-attempt', this.state.requestId || null);
    if (this.#settled) return;
    this.state.fail(new EarError('EAR_ERR_INTERNAL', 'internal error'));
    this.#settle({ kind: 'broken', error: err });
    this.#call?.abort(err instanceof Error ? err : WRITE_FAILED);
  }

  onHeaders (statusCode: number, headers: string[]): void {
    this.#safely(undefined, () => { this.#onHeaders(statusCode, headers); });
  }

  onData (view: Buffer): boolean {
    return this.#safely(true, () => this.#onData(view));
  }

  onReadEnd (): boolean {
    return this.#safely(true, () => this.#onReadEnd());
  }

  onComplete (): void {
    this.#safely(undefined, () => { this.#onComplete(); });
  }

  onError (error: Error): void {
    this.#safely(undefined, () => { this.#onError(error); });
  }

  #onHeaders (statusCode: number, headers: string[]): void {
    this.#status = statusCode;
    if (this.state.aborted) return;
    if (this.#splice !== null && (statusCode !== 200 || !(headerValue(headers, 'content-type') ?? '').includes('text/event-stream'))) {
      // A resumed leg that does not stream (the engine refused the continuation): its body is dropped.
      this.#settle({ kind: 'cut', error: new Error(`the engine resuming the stream answered ${statusCode}`) });
      return;
    }
    if (statusCode >= 500 && !this.opts.final) {
      // The body is read and dropped so the connection stays reusable.
      this.#settle({ kind: 'retryable', status: statusCode, error: new Error(`upstream answered ${statusCode}`) });
      return;
    }
    const contentType = headerValue(headers, 'content-type') ?? 'application/json';
    this.#observer = this.opts.observer(contentType);
    const head = this.#head;
    head.push(['content-type', contentType]);
    for (const h of this.opts.responseHeaders) head.push(h);
    if (contentType.includes('text/event-stream')) {
      head.push(['cache-control', 'no-cache']);
      this.#mode = Mode.Stream;
      this.#sse = true;
    } else {
      this.#mode = Mode.Buffer;
    }
  }

  #onData (view: Buffer): boolean {
    if (this.#settled || this.state.aborted) return true;
    // Kept past this read (the whole body, or the observer's copy of a JSON body): copied out of the client's read buffer.
    const chunk = this.#mode === Mode.Buffer || !this.#sse ? Buffer.from(view) : view;
    if (!this.#sse && this.#observer!.push(chunk)) this.opts.onFirstToken?.();
    this.#chunks.push(chunk);
    this.#bytes += chunk.length;
    if (this.#mode === Mode.Buffer && this.#bytes > (this.opts.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED)) {
      this.#mode = Mode.Stream; // too large to buffer: stream what we have and the rest
    }
    return true;
  }

  /** One socket read can carry many chunks (SSE events): they go out in one write now, before its buffer is reused. */
  #onReadEnd (): boolean {
    if (this.#mode === Mode.Stream) this.#write(false);
    return !this.#backpressure;
  }

  /**
   * Writes the queued chunks (and ends the response if `end`); on backpressure, pauses until uWS drains. With a
   * transcript, a partial event at the end waits for the next read unless `flush` (the body ended).
   */
  #write (end: boolean, flush = end): void {
    if (this.#settled || !this.state.live) return;
    const chunks = this.#chunks;
    // The partial event held from the last read goes first, joined with this read's bytes (no extra copy).
    if (this.#partial !== null && (chunks.length > 0 || flush)) {
      chunks.unshift(this.#partial);
      this.#partial = null;
    }
    if (chunks.length === 0 && !end && !(flush && this.#splice !== null)) return;
    this.#chunks = [];
    // One uWS write (one HTTP chunk) for the lot: each write() crosses into C++ and frames its own chunk.
    let data: Buffer | undefined = chunks.length > 1 ? joined(chunks) : chunks[0];
    if (this.#sse && this.#transcript !== null) {
      data = this.#splice !== null ? this.#spliced(data, flush) : this.#whole(data, flush);
      if (data !== undefined) this.#transcript.add(data);
      if (data === undefined && !end) return;
    }
    if (this.#sse && data !== undefined && this.#observer!.push(data)) this.opts.onFirstToken?.();
    if (end) this.#observeEnd();
    if (!this.state.stream(this.#status, this.#head, data, end) && !end && !this.#backpressure) {
      this.#backpressure = true;
      this.state.whenWritable(this.#drained);
    }
    // The write failed and ended the answer (a 500, or the connection closed): nothing more can reach the client.
    if (!end && this.state.ended && !this.state.aborted) {
      this.#settle({ kind: 'broken', error: WRITE_FAILED });
      this.#call?.abort(WRITE_FAILED);
    }
  }

  /** The whole events of `data`; the partial one at its end is held for the next read unless `flush`. */
  #whole (data: Buffer | undefined, flush: boolean): Buffer | undefined {
    if (data === undefined || flush) return data;
    const at = data.lastIndexOf('\n\n');
    if (at >= 0 && at + 2 === data.length) return data;
    // No blank line in this read: all of it is the partial event (an event longer than two reads).
    this.#partial = Buffer.from(at < 0 ? data : data.subarray(at + 2));
    return at < 0 ? undefined : data.subarray(0, at + 2);
  }

  /** A resumed leg's events, rewritten into the client's stream. */
  #spliced (data: Buffer | undefined, flush: boolean): Buffer | undefined {
    const splice = this.#splice!;
    const text = (data === undefined ? '' : splice.push(data)) + (flush ? splice.end() : '');
    return text === '' ? undefined : Buffer.from(text);
  }

  #onComplete (): void {
    if (this.#settled) return;
    const state = this.state;
    if (state.aborted) return this.#settle({ kind: 'aborted' });
    const transcript = this.#transcript;
    if (this.#mode === Mode.Stream && this.#sse && transcript !== null) {
      this.#write(false, true);
      // The body ended before the stream's last event (an engine that closed mid-stream): resumable as a reset is.
      if (state.headersSent && state.live && !transcript.overflowed && !transcript.ended()) {
        return this.#settle({ kind: 'cut', error: new UpstreamError('EAR_ERR_UPSTREAM_CLOSED', 'the engine ended its stream before its last event') });
      }
    }
    if (this.#mode === Mode.Buffer) {
      this.#observeEnd();
      const chunks = this.#chunks;
      state.send(this.#status, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, this.#bytes), this.#head);
    } else {
      this.#write(true);
    }
    this.#settle({ kind: 'done', status: this.#status });
  }

  #observeEnd (): void {
    const observer = this.#observer!;
    const sawFirst = observer.firstTokenSeen;
    observer.end();
    // A buffered (non-streaming) response reveals its first token only now, with the whole body.
    if (!sawFirst && observer.firstTokenSeen) this.opts.onFirstToken?.();
  }

  #onError (error: Error): void {
    if (this.#settled) return;
    const state = this.state;
    if (state.aborted) return this.#settle({ kind: 'aborted' });
    // What came before the error goes out first, as it would have without the batching.
    if (this.#mode === Mode.Stream) this.#write(false);
    if (this.#status === 0 && error instanceof UpstreamError && error.code === 'EAR_ERR_UPSTREAM_QUEUE_FULL') return this.#settle({ kind: 'busy' });
    // No answer at all (connect error, timeout before headers): always retryable; the caller answers 502 at the end.
    if (this.#status === 0) return this.#settle({ kind: 'retryable', status: null, error });
    if (!state.headersSent && !this.opts.final) return this.#settle({ kind: 'retryable', status: this.#status, error });
    const transcript = this.#transcript;
    if (state.headersSent && state.live && this.#sse && transcript !== null && !transcript.overflowed && !transcript.ended()) {
      return this.#settle({ kind: 'cut', error });
    }
    state.fail(isUpstreamTimeout(error)
      ? new EarError('EAR_ERR_UPSTREAM_TIMEOUT', 'upstream stopped sending mid-response (upstream body timeout)', { cause: error })
      : new EarError('EAR_ERR_UPSTREAM', 'upstream connection failed mid-response', { cause: error }));
    this.#settle({ kind: 'broken', error });
  }
}

/**
 * The pieces of one read joined in a buffer reused for every response: uWS copies what it cannot send at once
 * and the observer reads it as text, so nothing keeps it (Buffer.concat made a malloc'd ArrayBuffer per read).
 */
const JOIN = Buffer.allocUnsafe(128 << 10);

function joined (chunks: Buffer[]): Buffer {
  let n = 0;
  for (const c of chunks) n += c.length;
  if (n > JOIN.length) return Buffer.concat(chunks, n);
  let at = 0;
  for (const c of chunks) {
    JOIN.set(c, at);
    at += c.length;
  }
  return JOIN.subarray(0, n);
}

/** A header's value from the client's [name, value, ...] list (names in lower case). */
function headerValue (headers: string[], name: string): string | null {
  for (let i = 0; i < headers.length; i += 2) if (headers[i] === name) return headers[i + 1];
  return null;
}
