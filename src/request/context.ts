// One request as it moves through the pipeline (docs/architecture.md#a-requests-life): what the transport took in
// (who asks, for which session, with which body), what the phases learn (features, the placement, the attempt,
// the backends that failed it), and how it ended. Made once per request by the transport; the phases fill it in.
import { DIALECTS, type Dialect, type Endpoint, type EnginePath } from '../dialects/dialect.js';
import type { Features } from '../features/features.js';
import type { Placement, RoutingInput } from '../fleet/routing-port.js';
import type { SharedTurn } from '../store/shared-sessions.js';
import type { Usage } from '../upstream/stream-observer.js';
import type { Pipeline } from './pipeline.js';
import type { ClientLimits } from './client-gate.js';
import { NEUTRAL_RANK, type AdmissionRank } from '../core/engine-priority.js';
import type { AgentHints, Retention } from './hints.js';

/** Where a phase learns that the client (or the proxy's stream) went away, and hears of it while it waits. */
export interface Abortable {
  readonly aborted: boolean;
  onAbort: (() => void) | null;
}

/** What the transport knows of a request when it hands it over: the context's fields of the same names. */
export type RequestStart = Pick<RequestContext, 'id' | 'endpoint' | 'via' | 'startedAt' | 'keyUser' | 'priorityClass' | 'sessionId' |
  'parentSessionId' | 'body' | 'traceparent' | 'tracestate' | 'abort'> & {
  /** The client's query string ('' or without its '?'), sent on to the engine (Claude Code's `?beta=true`). */
  readonly query?: string;
  /** The route its metrics and spans name (default: the engine path of its endpoint). */
  readonly route?: string;
  /** Backends it may not go to from the start (ext_proc: those the proxy's subset leaves out). */
  readonly exclude?: Set<number>;
  /** Its client's rate limits, when one applies (the client gate's answer at the door). */
  readonly limits?: ClientLimits | null;
  /** Its API key may set the engine's `priority` itself (config enginePriorityKeys). */
  readonly ownEnginePriority?: boolean;
  /** It is a KV leg (a /v1/context prefill): a priority engine runs it first. */
  readonly kvLeg?: boolean;
};

/** How a request ended, as its client saw it. */
export interface Outcome {
  /** The status the client was answered with (0 if none: it went away first). */
  status: number;
  aborted: boolean;
  /** The error it was answered with, if any. */
  error: unknown;
  /** The backend whose answer it got ('' when none did). */
  backend: string;
  /**
   * Its answer ended in a tool call (finish_reason `tool_calls`, stop_reason `tool_use`, a Responses
   * `function_call` item): the agent will come back with the same prefix and the tool's result.
   */
  toolCall: boolean;
}

export class RequestContext {
  readonly id: string;
  readonly endpoint: Endpoint;
  /** The API it speaks: its engine path, error shape and stream shape. */
  readonly dialect: Dialect;
  /** How it reached EAR: uWS (`ear serve`) or ext_proc (`ear epp`: Envoy sends it). */
  readonly via: 'http' | 'ext_proc';
  /** What it is sent to: the engine path with the client's query string. */
  readonly target: string;
  /** The route its metrics and spans name. */
  readonly route: string;
  /** When it arrived (the pipeline's clock): TTFT and end-to-end latency count from here. */
  readonly startedAt: number;
  /** The user its API key stands for (an HMAC id), used when the body names none. */
  readonly keyUser: string | null;
  /** Its priority class (0 high, 1 normal, 2 low); an agent's priority hint may move it (request/hints.ts). */
  priorityClass: number;
  /**
   * Its session (none for a request that leaves no KV behind: count_tokens is routed by load alone): the
   * transport's, else the program its agentic_context names (set with the features, request/hints.ts).
   */
  sessionId: string | null;
  parentSessionId: string | null;
  readonly body: Buffer;
  /** The client's traceparent and tracestate ('' when absent). */
  readonly traceparent: string;
  readonly tracestate: string;
  readonly abort: Abortable;
  /** Its client's rate limits (null: none applies): its tokens are charged and corrected through them. */
  readonly limits: ClientLimits | null;
  /** Backends this request may not go to: the proxy's subset, then each that failed an attempt. */
  readonly exclude: Set<number>;
  /** Whether the transport restricted the candidates before any attempt (ext_proc's subset). */
  readonly restricted: boolean;
  /** Its API key may set the engine's `priority` itself; else any it sends is dropped (request-body.ts). */
  readonly ownEnginePriority: boolean;
  /** A KV leg (a /v1/context prefill): it goes at the most urgent engine priority. */
  readonly kvLeg: boolean;
  /** Where admission ranked it: its engine priority on every attempt (a retry keeps its first rank). */
  rank: AdmissionRank = NEUTRAL_RANK;
  features: Features | null = null;
  input: RoutingInput | null = null;
  /** The body engines get: the client's, less what EAR strips (client kv_transfer_params). */
  forward: Buffer;
  /** The session's shared record for this turn (replicas sharing a store); null without one. */
  shared: SharedTurn | null = null;
  /** The placement the request is charged to now (the current attempt's). */
  placement: Placement | null = null;
  /** 0 for the first placement, n for the n-th retry. */
  attempt = 0;
  firstTokenAt = 0;
  usage: Usage | null = null;
  /** Content events seen when the engine reported no usage (an estimate of output tokens). */
  contentEvents = 0;
  readonly outcome: Outcome = { status: 0, aborted: false, error: null, backend: '', toolCall: false };
  /** The agent's hints (vllm_xargs.agentic_context, cache_control), from the features; null when it sent none. */
  hints: AgentHints | null = null;
  /** How long its prefix is to be kept after it: a hint's TTL, or the tool gap of a turn that ended in a tool call. */
  retention: Retention | null = null;
  /** Its model's max_model_len among the engines (context-length.ts), once looked up; undefined until then. */
  contextLimit: number | null | undefined = undefined;

  /** The engine path it is sent to: its dialect's. */
  get path (): EnginePath {
    return this.dialect.path;
  }

  constructor (readonly pipeline: Pipeline, s: RequestStart) {
    this.id = s.id;
    this.endpoint = s.endpoint;
    this.dialect = DIALECTS[s.endpoint];
    this.via = s.via;
    const path = this.dialect.path;
    this.target = s.query === undefined || s.query === '' ? path : `${path}?${s.query}`;
    this.route = s.route ?? path;
    this.startedAt = s.startedAt;
    this.keyUser = s.keyUser;
    this.priorityClass = s.priorityClass;
    this.sessionId = this.dialect.fillsCache ? s.sessionId : null;
    this.parentSessionId = this.dialect.fillsCache ? s.parentSessionId : null;
    this.body = s.body;
    this.forward = s.body;
    this.traceparent = s.traceparent;
    this.tracestate = s.tracestate;
    this.abort = s.abort;
    this.limits = s.limits ?? null;
    this.exclude = s.exclude ?? new Set();
    this.restricted = this.exclude.size > 0;
    this.ownEnginePriority = s.ownEnginePriority === true;
    this.kvLeg = s.kvLeg === true;
  }
}
