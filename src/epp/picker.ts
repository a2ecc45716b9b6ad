// The endpoint picker's decision for one request, made by the process core's one request pipeline, the one its
// HTTP door runs too (gateway/core.ts, src/request/), after the same accept (request/accept.ts): features from the route pool, admission (the scheduler may hold the request), the policy's
// placement and the bookkeeping that follows (first token, end, the session's service). Only the transport differs:
// the proxy sends the request, so the pipeline's send names the endpoints, primary first, and the proxy reports
// which served and how the response went.
import type { Backend } from '../fleet/backends.js';
import { EarError, errorAnswer } from '../errors/errors.js';
import { dialectAt, type Dialect } from '../dialects/dialect.js';
import { decodeBody } from '../request/body-encoding.js';
import type { GatedRoute, ClientLimits } from '../request/client-gate.js';
import { admitClient, credentialOf, readRequestHead, type HeaderOf } from '../request/accept.js';
import type { StreamObserver } from '../upstream/stream-observer.js';
import type { TraceHeaders } from '../upstream/traceparent.js';
import { channels } from '../request/channels.js';
import { RequestContext } from '../request/context.js';
import { runPipeline } from '../request/pipeline.js';
import { moveTo } from '../request/route.js';
import type { Send, SendResult, Transport } from '../request/transport.js';
import type { ProcessCore } from '../gateway/core.js';
import { endpointOf, type EndpointFilter } from './endpoints.js';

/** The address Envoy saw the client connect from (its own header, not one a client writes); '' when absent. */
const CLIENT_ADDRESS = 'x-envoy-external-address';

export interface PickerDeps {
  /** The process core: its backends, gate, routing state and the one pipeline every door runs (gateway/core.ts). */
  core: ProcessCore;
  /** Endpoints named after the primary, for the proxy to try in order when it fails. */
  fallbacks: number;
}

export interface PickInput {
  /** The request's :path (query included). */
  path: string;
  /** Request headers by lower-case name. */
  headers: ReadonlyMap<string, string>;
  /** The whole body; null when the request had none. */
  body: Buffer | null;
  /** The endpoints the proxy allows (subset hint or conformance test header); null: every backend. */
  allowed: EndpointFilter | null;
  /** When the request's headers arrived (the server span's start); absent: now. */
  receivedAt?: number;
  /**
   * Called, before the pick answers or throws, when a rate limit applies to the client: its answers (the immediate
   * response of an error, the response headers of the engine's) carry the limits' headers.
   */
  limited?: (limits: ClientLimits) => void;
}

/** Told by the picker when an admission wait may be abandoned (the proxy's stream ended). */
export interface AbortSignalLike { aborted: boolean; onAbort: (() => void) | null }

/** A picked request: the endpoints to name, and its bookkeeping until the response ends. */
export interface Picked {
  /** routed: admitted and placed by the policy; passthrough: not an inference call, named unrecorded. */
  readonly kind: 'routed' | 'passthrough';
  readonly endpoints: readonly string[];
  /**
   * The body to send upstream when it differs from the client's (client kv_transfer_params stripped, or a
   * compressed body decoded: content-encoding is removed then); else null.
   */
  readonly forward: Buffer | null;
  /** Request headers the proxy must drop (content-encoding of a body EAR decoded). */
  readonly removeHeaders: readonly string[];
  /** The backend charged with the request now (after a fallback, the one that served). */
  readonly backend: Backend;
  /** traceparent (and tracestate) to set on the request for the engine: EAR's server span; null with tracing off. */
  readonly traceHeaders: TraceHeaders | null;
  /** The proxy says which endpoint served; returns how it relates to the ones named. */
  served (endpoint: string | null): 'primary' | 'fallback' | 'unlisted' | 'unreported';
  firstToken (): void;
  /**
   * The response ended (ok: a complete 2xx; `status` the engine's, 0 if none came; `seen`: what its observer
   * read: usage, content events, the response id), or the stream did (`abandoned`: the phase it ended in): idempotent.
   */
  finish (seen: StreamObserver | null, ok: boolean, status?: number, abandoned?: 'queued' | 'response' | null): void;
}

const pathOf = (path: string): string => {
  const q = path.indexOf('?');
  return q < 0 ? path : path.slice(0, q);
};

/** The API a request's :path names (its query string aside); null for a path that is no inference call. */
export function dialectOfRequest (path: string): Dialect | null {
  return dialectAt(pathOf(path));
}

export class EndpointPicker {
  readonly #d: PickerDeps;

  constructor (deps: PickerDeps) {
    this.#d = deps;
  }

  /**
   * Counts a refusal of this door before the pipeline (ear_requests_total, as the uWS door counts its own): a
   * request for an inference route (`path`, its query aside) answered `err`.
   */
  refused (path: string, err: unknown): void {
    const dialect = dialectOfRequest(path);
    if (dialect !== null) this.#d.core.refused(dialect.path, errorAnswer(dialect, err).status);
  }

  /** Backends the request may not go to: those whose endpoint the proxy's list leaves out. */
  #excluded (allowed: EndpointFilter | null): Set<number> {
    const out = new Set<number>();
    if (allowed === null) return out;
    for (const b of this.#d.core.backends) if (!allowed.allows(endpointOf(b))) out.add(b.index);
    return out;
  }

  /**
   * The endpoints for a request. Throws EarError: 400/401/404 for the request's own faults, 429 when
   * admission sheds it or its rate limit refuses it, 503 when no allowed endpoint serves it, 504 after waiting
   * queueTimeoutMs. Resolves null when the stream ended while the request waited for admission (nothing is held then).
   */
  async pick (input: PickInput, signal: AbortSignalLike): Promise<Picked | null> {
    const core = this.#d.core;
    const dialect = dialectOfRequest(input.path);
    const endpoint = dialect?.endpoint;
    const header: HeaderOf = (h) => input.headers.get(h) ?? '';
    let ctx: RequestContext;
    let decoded: boolean;
    try {
      // API keys and rate limits as the uWS door applies them to the same routes (the proxy may check keys too).
      const auth = credentialOf(header);
      let keyUser: string | null = null;
      let limits: ClientLimits | null = null;
      if (dialect !== null || pathOf(input.path) === '/v1/models') {
        ({ user: keyUser, limits } = admitClient(core.gate, (dialect?.path ?? '/v1/models') as GatedRoute, auth, () => input.headers.get(CLIENT_ADDRESS) ?? '', input.limited));
      }
      const exclude = this.#excluded(input.allowed);
      if (endpoint === undefined || input.body === null || input.body.length === 0) return this.#passthrough(exclude);
      const head = readRequestHead(header, auth, core.config);
      // A compressed body is decoded for its features and sent on decoded (engines do not decode request bodies).
      decoded = head.codings.length > 0;
      const body = decoded ? await decodeBody(input.body, head.codings, core.config.maxBodyBytes) : input.body;
      ctx = new RequestContext(core.pipeline, {
        id: input.headers.get('x-request-id') ?? '', endpoint, via: 'ext_proc', startedAt: input.receivedAt ?? core.now(), keyUser, priorityClass: head.priorityClass,
        sessionId: head.sessionId, parentSessionId: head.parentSessionId, body, traceparent: head.traceparent, tracestate: head.tracestate, abort: signal, exclude,
        limits, ownEnginePriority: head.ownEnginePriority
      });
    } catch (err) {
      this.refused(input.path, err);
      throw err;
    }
    return await new Promise<Picked | null>((resolve, reject) => {
      void runPipeline(ctx, new ExtProcTransport(this.#d, resolve, reject, decoded));
    });
  }

  /**
   * A request that is not an inference call (another path, or no body: a model list, a health check through the
   * proxy) has no model to route by: the least busy healthy backend takes it, unrecorded.
   */
  #passthrough (exclude: ReadonlySet<number>): Picked {
    let best: Backend | null = null;
    for (const b of this.#d.core.backends) {
      if (b.health !== 'healthy' || b.draining || exclude.has(b.index)) continue;
      if (best === null || b.inFlight < best.inFlight) best = b;
    }
    if (best === null) throw new EarError('EAR_ERR_NO_BACKEND', 'no healthy backend among the allowed endpoints');
    return new PassthroughRequest(this.#d, best);
  }
}

/**
 * The ext_proc transport of the pipeline: its send names the endpoints (the pick resolves with them) and lasts
 * until the proxy reports the response's end; a failure before that is the pick's rejection.
 */
class ExtProcTransport implements Transport {
  #answered = false;
  #status = 0;
  #picked: PickedRequest | null = null;

  constructor (readonly d: PickerDeps, readonly resolve: (p: Picked | null) => void, readonly reject: (err: unknown) => void, readonly decoded: boolean) {}

  /**
   * The proxy's next choices should the primary fail: other backends serving the model, least pending prefill
   * first (then fewest in flight). They are only named: the request is recorded where it is served.
   */
  endpoints (ctx: RequestContext, primary: Backend): readonly string[] {
    const out = [endpointOf(primary)];
    if (this.d.fallbacks === 0) return out;
    const model = ctx.input!.model;
    const pending = (b: Backend): number => this.d.core.state.pendingPrefill?.(b) ?? 0;
    for (const b of this.d.core.backends
      .filter((b) => b !== primary && b.serves(model) && !ctx.exclude.has(b.index))
      .sort((a, b) => pending(a) - pending(b) || a.inFlight - b.inFlight)
      .slice(0, this.d.fallbacks)) out.push(endpointOf(b));
    return out;
  }

  send (ctx: RequestContext, s: Send): Promise<SendResult> {
    return new Promise((done) => {
      const picked = new PickedRequest(this.d, ctx, s, this.decoded, (r) => {
        this.#status = r.status;
        done(r.sent);
      });
      this.#picked = picked;
      this.#answered = true;
      this.resolve(picked);
    });
  }

  fail (ctx: RequestContext, err: unknown): void {
    if (this.#answered) return;
    this.#answered = true;
    this.#status = errorAnswer(ctx.dialect, err).status;
    this.reject(err);
  }

  settle (ctx: RequestContext): { status: number; aborted: boolean } {
    // The stream ended while the request waited: nothing was named, nothing is held.
    if (!this.#answered) {
      this.#answered = true;
      this.resolve(null);
    }
    return { status: this.#status, aborted: ctx.abort.aborted || (this.#picked?.abandoned ?? false) };
  }
}

class PassthroughRequest implements Picked {
  readonly kind = 'passthrough';
  readonly endpoints: readonly string[];
  readonly forward = null;
  readonly removeHeaders: readonly string[] = [];
  /** Not an inference call: no span, and the client's own trace headers go through as Envoy has them. */
  readonly traceHeaders = null;
  #done = false;

  constructor (readonly d: PickerDeps, readonly backend: Backend) {
    this.endpoints = [endpointOf(backend)];
    d.core.fleet.hold(backend);
  }

  served (endpoint: string | null): 'primary' | 'fallback' | 'unlisted' | 'unreported' {
    if (endpoint === null) return 'unreported';
    return endpoint === this.endpoints[0] ? 'primary' : 'unlisted';
  }

  firstToken (): void {}

  finish (): void {
    if (this.#done) return;
    this.#done = true;
    this.d.core.fleet.release(this.backend);
  }
}

/** A routed request named to the proxy: what the proxy reports goes back into the pipeline's send. */
class PickedRequest implements Picked {
  readonly kind = 'routed';
  readonly endpoints: readonly string[];
  readonly forward: Buffer | null;
  readonly removeHeaders: readonly string[];
  readonly traceHeaders: TraceHeaders | null;
  /** The stream ended before the response did. */
  abandoned = false;
  #done = false;

  constructor (readonly d: PickerDeps, readonly ctx: RequestContext, readonly send: Send, decoded: boolean, readonly ended: (r: { sent: SendResult; status: number }) => void) {
    this.endpoints = send.endpoints ?? [endpointOf(send.backend)];
    this.forward = send.body === ctx.body && !decoded ? null : send.body;
    this.removeHeaders = decoded ? ['content-encoding'] : [];
    this.traceHeaders = send.headers.length === 0 ? null : send.headers;
  }

  get backend (): Backend {
    return this.ctx.placement!.backend;
  }

  /** After the proxy's fallback the request is recorded on the backend that served it (the pipeline's moveTo). */
  served (endpoint: string | null): 'primary' | 'fallback' | 'unlisted' | 'unreported' {
    const relation = this.#served(endpoint);
    if (channels.served.hasSubscribers) channels.served.publish({ ctx: this.ctx, endpoint, relation });
    return relation;
  }

  #served (endpoint: string | null): 'primary' | 'fallback' | 'unlisted' | 'unreported' {
    if (endpoint === null) return 'unreported';
    const at = this.endpoints.indexOf(endpoint);
    if (at === 0) return 'primary';
    if (!this.#done) {
      const server = this.d.core.backends.find((b) => !b.gone && endpointOf(b) === endpoint);
      // One that no longer serves (gone, down, draining) keeps the first record.
      if (server !== undefined) moveTo(this.ctx, server);
    }
    return at > 0 ? 'fallback' : 'unlisted';
  }

  firstToken (): void {
    if (!this.#done) this.send.firstToken();
  }

  /**
   * The response ended (ok: a complete 2xx; `status` the engine's, 0 if none came), or the stream did
   * (`abandoned`: the phase it ended in): idempotent.
   */
  finish (seen: StreamObserver | null, ok: boolean, status = 0, abandoned: 'queued' | 'response' | null = null): void {
    if (this.#done) return;
    this.#done = true;
    this.abandoned = abandoned !== null;
    const result = abandoned !== null ? { kind: 'aborted' as const } : { kind: 'done' as const, status, ok };
    this.ended({ sent: { result, usage: seen?.usage ?? null, contentEvents: seen?.contentEvents ?? 0, responseId: seen?.responseId ?? null, toolCall: seen?.toolCall ?? false }, status });
  }
}
