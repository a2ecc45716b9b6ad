// One non-streaming POST to an engine through its backend's pool, the whole answer buffered (bounded): the
// prefill of an explicit context and the source leg of a KV transfer. Never throws: a failure is status null.
import type { UpstreamCall, UpstreamHandler, UpstreamPool } from './pool.js';
import { requestHeaders } from './headers.js';
import type { TraceHeaders } from './traceparent.js';

/** The engine's answer to a one-token request is small JSON; more than this is not one. */
const MAX_ANSWER_BYTES = 1 << 20;

export interface Answer {
  /** null: no answer (connect error, timeout, a body too large to be a prefill's). */
  status: number | null;
  contentType: string;
  body: Buffer;
}

/** `trace`: the trace context the engine joins (a KV transfer's span), if any. */
export function post (pool: UpstreamPool, path: string, body: Buffer, rid: string, signal: { aborted: boolean; onAbort: (() => void) | null }, trace?: TraceHeaders): Promise<Answer> {
  return new Promise((resolve) => {
    pool.dispatch({ path, method: 'POST', body, headers: requestHeaders(rid, trace) }, new BufferedAnswer(resolve, signal));
  });
}

class BufferedAnswer implements UpstreamHandler {
  #status: number | null = null;
  #type = 'application/json';
  #chunks: Buffer[] = [];
  #bytes = 0;
  #done = false;
  #call: UpstreamCall | null = null;

  constructor (readonly resolve: (a: Answer) => void, readonly signal: { aborted: boolean; onAbort: (() => void) | null }) {
    signal.onAbort = () => this.#call?.abort(new Error('the client went away'));
  }

  #settle (a: Answer): void {
    if (this.#done) return;
    this.#done = true;
    this.signal.onAbort = null;
    this.resolve(a);
  }

  onStart (call: UpstreamCall): void {
    this.#call = call;
    if (this.signal.aborted) call.abort(new Error('the client went away'));
  }

  onHeaders (status: number, headers: string[]): void {
    this.#status = status;
    for (let i = 0; i < headers.length; i += 2) if (headers[i] === 'content-type') this.#type = headers[i + 1];
  }

  onData (chunk: Buffer): boolean {
    this.#bytes += chunk.length;
    if (this.#bytes > MAX_ANSWER_BYTES) {
      this.#call?.abort(new Error('answer too large for a one-token request'));
      return true;
    }
    this.#chunks.push(Buffer.from(chunk)); // a view of a reused read buffer
    return true;
  }

  onReadEnd (): boolean {
    return true;
  }

  onComplete (): void {
    this.#settle({ status: this.#status, contentType: this.#type, body: Buffer.concat(this.#chunks) });
  }

  onError (_err: Error): void {
    this.#settle({ status: null, contentType: this.#type, body: Buffer.alloc(0) });
  }
}
