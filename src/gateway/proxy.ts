// One upstream attempt: send the body to a backend through its undici Pool and stream the answer back through
// uWS with backpressure (undici's body is pulled only as fast as the client takes it). The caller decides
// what to do with an attempt that failed before any byte reached the client (retry on the next-best backend).
import type { Dispatcher } from 'undici';
import { GatewayError } from './errors.js';
import { StreamObserver } from './stream-observer.js';
import type { ResponseState } from './uws-io.js';

export type AttemptResult =
  /** Nothing reached the client: a connect error, a timeout before headers, or a 5xx. Safe to retry elsewhere. */
  | { kind: 'retryable'; status: number | null; error: unknown }
  | { kind: 'done'; status: number }
  /** The client went away; the upstream request was aborted. */
  | { kind: 'aborted' }
  /** The upstream failed after bytes reached the client: the stream was ended with an error event. */
  | { kind: 'broken'; error: unknown };

export interface AttemptOptions {
  path: string;
  body: Buffer;
  /** Headers sent upstream. */
  headers: Record<string, string>;
  /** Headers added to the client's response (x-ear-backend, x-request-id). */
  responseHeaders: Array<[string, string]>;
  /** The last attempt forwards a 5xx as it is instead of asking for a retry. */
  final: boolean;
  observer: (contentType: string) => StreamObserver;
  /** Called once, when the first content token passes. */
  onFirstToken?: () => void;
  /** Largest non-streaming body buffered to send with a Content-Length; larger ones are streamed. */
  maxBufferedBytes?: number;
}

export async function attempt (state: ResponseState, pool: Dispatcher, opts: AttemptOptions): Promise<{ result: AttemptResult; observer: StreamObserver | null }> {
  let up: Dispatcher.ResponseData;
  try {
    up = await pool.request({ path: opts.path, method: 'POST', body: opts.body, headers: opts.headers, signal: state.abort.signal });
  } catch (error) {
    if (state.aborted) return { result: { kind: 'aborted' }, observer: null };
    return { result: { kind: 'retryable', status: null, error }, observer: null };
  }
  const { statusCode, headers, body } = up;
  if (state.aborted) {
    body.destroy();
    return { result: { kind: 'aborted' }, observer: null };
  }
  if (statusCode >= 500 && !opts.final) {
    body.resume().on('error', () => {});
    return { result: { kind: 'retryable', status: statusCode, error: new Error(`upstream answered ${statusCode}`) }, observer: null };
  }
  const contentType = String(headers['content-type'] ?? 'application/json');
  const observer = opts.observer(contentType);
  const head: Array<[string, string]> = [['content-type', contentType], ...opts.responseHeaders];
  const sse = contentType.includes('text/event-stream');
  if (sse) head.push(['cache-control', 'no-cache']);
  const maxBuffered = opts.maxBufferedBytes ?? (16 << 20);
  const buffered: Buffer[] = [];
  let bufferedBytes = 0;
  let streaming = sse;
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      if (state.aborted) break;
      if (observer.push(chunk)) opts.onFirstToken?.();
      if (!streaming) {
        buffered.push(chunk);
        bufferedBytes += chunk.length;
        if (bufferedBytes <= maxBuffered) continue;
        streaming = true; // too large to buffer: stream what we have and the rest
        state.head(statusCode, head);
        for (const b of buffered.splice(0)) await state.write(b);
        continue;
      }
      if (!state.headersSent) state.head(statusCode, head);
      const wait = state.write(chunk);
      if (wait) await wait;
    }
  } catch (error) {
    if (state.aborted) return { result: { kind: 'aborted' }, observer };
    if (!state.headersSent && !opts.final) return { result: { kind: 'retryable', status: statusCode, error }, observer };
    state.fail(new GatewayError('EAR_ERR_UPSTREAM', 'upstream connection failed mid-response', { cause: error }));
    return { result: { kind: 'broken', error }, observer };
  }
  if (state.aborted) {
    body.destroy();
    return { result: { kind: 'aborted' }, observer };
  }
  const sawFirst = observer.firstTokenSeen;
  observer.end();
  // A buffered (non-streaming) response reveals its first token only now, with the whole body.
  if (!sawFirst && observer.firstTokenSeen) opts.onFirstToken?.();
  if (streaming) {
    if (!state.headersSent) state.head(statusCode, head);
    state.end();
  } else {
    state.send(statusCode, buffered.length === 1 ? buffered[0] : Buffer.concat(buffered, bufferedBytes), head);
  }
  return { result: { kind: 'done', status: statusCode }, observer };
}
