// What the pipeline asks of a transport (docs/architecture.md#a-requests-life: accept and send are the
// transport's). uWS (`ear serve`) sends the request to the engine and streams the answer; ext_proc (`ear epp`)
// names the endpoints to Envoy, which sends it, and reports how the response went.
import type { Backend } from '../fleet/backends.js';
import type { Usage } from '../upstream/stream-observer.js';
import type { TraceHeaders } from '../upstream/traceparent.js';
import type { RequestContext } from './context.js';
import type { ResumePlan, Splice } from '../resume/stream-resume.js';

export type AttemptResult =
  /** Nothing reached the client: a connect error, a timeout before headers, or a 5xx. Safe to retry elsewhere. */
  | { kind: 'retryable'; status: number | null; error: unknown }
  /** The engine's answer went to the client; `ok` false: it ended badly all the same (an error in the stream). */
  | { kind: 'done'; status: number; ok?: boolean }
  /** The client went away; the upstream request was aborted. */
  | { kind: 'aborted' }
  /** The upstream failed after bytes reached the client: the stream was ended with an error event. */
  | { kind: 'broken'; error: unknown }
  /**
   * The upstream failed after bytes reached the client (reset, EOF before its last event, a stall) and the
   * client's stream is still open, at a whole event: the pipeline resumes it elsewhere or ends it with an error event.
   */
  | { kind: 'cut'; error: unknown }
  /**
   * Not sent: the backend's connection pool already has its most requests waiting for a socket (queue_full). The
   * backend is busy, not failed: nothing reached it or the client.
   */
  | { kind: 'busy' };

export interface SendResult {
  result: AttemptResult;
  /** What the engine reported, if it did. */
  usage: Usage | null;
  /** Content events seen (output tokens, roughly, when no usage came). */
  contentEvents: number;
  /** The id the engine gave the response (Responses API), if it named one. */
  responseId?: string | null;
  /** The answer ended in a tool call (stream-shapes.ts says how each API shows it). */
  toolCall?: boolean;
}

/** One attempt for the transport to make. */
export interface Send {
  backend: Backend;
  /** What the backend is sent. */
  body: Buffer;
  attempt: number;
  /** What `Transport.endpoints` named for it (null: the transport names none). */
  endpoints: readonly string[] | null;
  /** No attempt or no other backend is left: an engine's 5xx goes to the client as it is. */
  final: boolean;
  /** Trace headers for the engine. */
  headers: TraceHeaders;
  /** The transport calls this when the first content token passes (once). */
  firstToken (): void;
  /** A resumed leg: the client's stream is open; the engine's events go through this splice into it. */
  splice?: Splice;
}

export interface Transport {
  /** A transport that names endpoints for another proxy to send to (ext_proc): those for `backend`, primary first. */
  endpoints? (ctx: RequestContext, backend: Backend): readonly string[];
  send (ctx: RequestContext, s: Send): Promise<SendResult>;
  /**
   * How a stream cut after its first byte ('cut') can go on, the engine having been sent `body`. Absent: never
   * (ext_proc: Envoy owns the client's stream).
   */
  continuation? (ctx: RequestContext, body: Buffer): ResumePlan;
  /** Ends a cut stream with `tail`, the terminal event its engine did not send. */
  finish? (ctx: RequestContext, tail: string): void;
  /** Answers the client with `err` (in the API's shape), if nothing was answered yet; mid-stream, an error event. */
  fail (ctx: RequestContext, err: unknown): void;
  /** The request is over, whatever happened: the status its client got (0: none) and whether it went away. */
  settle (ctx: RequestContext): { status: number; aborted: boolean };
}
