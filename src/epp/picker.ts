// The endpoint picker's decision for one request, made by EAR's own routing host exactly as the gateway makes
// it: features from the route pool, admission (the scheduler may hold the request), the policy's placement and
// the bookkeeping that follows (first token, end, the session's service). Only the transport differs: the proxy
// sends the request, so the answer is a list of endpoints, primary first, and the proxy reports which served.
import { NoCandidateError } from '../core/policy.js';
import type { Backend } from '../gateway/backends.js';
import type { GatewayConfig } from '../config/index.js';
import { GatewayError } from '../gateway/errors.js';
import { waitForAdmission } from '../gateway/admission-wait.js';
import { routeFacts } from '../gateway/route-facts.js';
import type { FeatureSource } from '../gateway/inline-features.js';
import type { Endpoint } from '../gateway/request-body.js';
import { priorityClassOf, type Gateway } from '../gateway/server.js';
import type { GatedRoute } from '../gateway/client-gate.js';
import { bearerToken } from '../gateway/credentials.js';
import type { Placement, RoutingInput, RoutingState } from '../gateway/routing-state.js';
import { sessionOf } from '../gateway/session-id.js';
import type { Usage } from '../gateway/stream-observer.js';
import type { SharedSessions, SharedTurn } from '../gateway/shared-sessions.js';
import type { AdmissionTrace, ProxiedTrace, RequestTrace, Tracing } from '../telemetry/tracing.js';
import { clientTraceHeaders, type TraceHeaders } from '../telemetry/traceparent.js';
import { endpointOf, type EndpointFilter } from './endpoints.js';

const ENDPOINTS: Record<string, Endpoint> = { '/v1/chat/completions': 'chat', '/v1/completions': 'completions' };

/** The address Envoy saw the client connect from (its own header, not one a client writes); '' when absent. */
const CLIENT_ADDRESS = 'x-envoy-external-address';

export interface PickerDeps {
  config: Readonly<GatewayConfig>;
  gateway: Pick<Gateway, 'backends' | 'metrics' | 'enter' | 'exit' | 'gate'>;
  routing: RoutingState;
  features: FeatureSource;
  now: () => number;
  /** Endpoints named after the primary, for the proxy to try in order when it fails. */
  fallbacks: number;
  /** Session state shared with other replicas (--session-store redis://…); null with `memory`. */
  sessions?: SharedSessions | null;
  /** Spans for picked requests (src/telemetry/); null or absent: off, and a pick pays one null check. */
  tracing?: Tracing | null;
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
}

/** Told by the picker when an admission wait may be abandoned (the proxy's stream ended). */
export interface AbortSignalLike { aborted: boolean; onAbort: (() => void) | null }

/** A picked request: the endpoints to name, and its bookkeeping until the response ends. */
export interface Picked {
  /** routed: admitted and placed by the policy; passthrough: not an inference call, named unrecorded. */
  readonly kind: 'routed' | 'passthrough';
  readonly endpoints: readonly string[];
  /** The body to send upstream when it differs from the client's (client kv_transfer_params stripped); else null. */
  readonly forward: Buffer | null;
  /** The backend charged with the request now (after a fallback, the one that served). */
  readonly backend: Backend;
  /** traceparent (and tracestate) to set on the request for the engine: EAR's server span; null with tracing off. */
  readonly traceHeaders: TraceHeaders | null;
  /** The proxy says which endpoint served; returns how it relates to the ones named. */
  served (endpoint: string | null): 'primary' | 'fallback' | 'unlisted' | 'unreported';
  firstToken (): void;
  /**
   * The response ended (ok: a complete 2xx; `status` the engine's, 0 if none came), or the stream did
   * (`abandoned`: the phase it ended in): idempotent.
   */
  finish (usage: Usage | null, ok: boolean, status?: number, abandoned?: 'queued' | 'response' | null): void;
}

export class EndpointPicker {
  readonly #d: PickerDeps;
  readonly #decisionSeconds;

  constructor (deps: PickerDeps) {
    this.#d = deps;
    this.#decisionSeconds = deps.gateway.metrics.decisionSeconds.labels(deps.config.policy);
  }

  /** A completion request's server span, continuing the trace of the headers Envoy got (checked as serve does). */
  #trace (path: string, input: PickInput, tracing: Tracing): RequestTrace {
    const h = clientTraceHeaders(input.headers.get('traceparent') ?? '', input.headers.get('tracestate') ?? '');
    return tracing.request({
      path, via: 'ext_proc', traceparent: h[0]?.[1] ?? '', tracestate: h[1]?.[1] ?? '', startTime: input.receivedAt ?? this.#d.now(),
      requestId: input.headers.get('x-request-id') ?? ''
    });
  }

  /** Backends the request may not go to: those whose endpoint the proxy's list leaves out. */
  #excluded (allowed: EndpointFilter | null): Set<number> {
    const out = new Set<number>();
    if (allowed === null) return out;
    for (const b of this.#d.gateway.backends) if (!allowed.allows(endpointOf(b))) out.add(b.index);
    return out;
  }

  /**
   * The endpoints for a request. Throws GatewayError: 400/401/404 for the request's own faults, 429 when
   * admission sheds it or its rate limit refuses it, 503 when no allowed endpoint serves it, 504 after waiting
   * queueTimeoutMs. Resolves null
   * when the stream ended while the request waited for admission (nothing is held then).
   */
  async pick (input: PickInput, signal: AbortSignalLike): Promise<Picked | null> {
    const qmark = input.path.indexOf('?');
    const path = qmark < 0 ? input.path : input.path.slice(0, qmark);
    const endpoint = ENDPOINTS[path];
    // API keys and rate limits as `ear serve` applies them to the same routes (the proxy may check keys too).
    let keyUser: string | null = null;
    if (endpoint !== undefined || path === '/v1/models') {
      const client = this.#d.gateway.gate.admit(path as GatedRoute, input.headers.get('authorization') ?? '', () => input.headers.get(CLIENT_ADDRESS) ?? '');
      if (client instanceof GatewayError) throw client;
      keyUser = client.user;
    }
    const exclude = this.#excluded(input.allowed);
    if (endpoint === undefined || input.body === null || input.body.length === 0) return this.#passthrough(exclude);
    const priorityClass = priorityClassOf(input.headers.get('x-ear-priority') ?? '', bearerToken(input.headers.get('authorization') ?? ''), this.#d.config.apiKeyPriority);
    const tracing = this.#d.tracing ?? null;
    if (tracing === null) return await this.#pickRouted(input, endpoint, input.body, exclude, priorityClass, keyUser, signal, null);
    const span = this.#trace(path, input, tracing);
    try {
      const picked = await this.#pickRouted(input, endpoint, input.body, exclude, priorityClass, keyUser, signal, span);
      if (picked === null) span.end(0, true, null);
      return picked;
    } catch (err) {
      span.end(err instanceof GatewayError ? err.status : 500, false, err);
      throw err;
    }
  }

  /** An inference call: admitted and placed. `span` (tracing on) is ended by the caller unless a Picked is returned. */
  async #pickRouted (input: PickInput, endpoint: Endpoint, body: Buffer, exclude: Set<number>, priorityClass: number, keyUser: string | null,
    signal: AbortSignalLike, span: RequestTrace | null): Promise<Picked | null> {
    const watch = span === null ? null : span.proxied();
    const { sessionId, parentSessionId } = sessionOf((h) => input.headers.get(h) ?? '');
    const f0 = this.#d.now();
    const f = await this.#d.features(endpoint, body, sessionId);
    this.#d.gateway.metrics.featureSeconds.observe((this.#d.now() - f0) / 1000);
    span?.features(f.model, sessionId, f.promptTokens, f.blockKeys.length);
    // Unknown to every backend that has listed its models: the client's mistake. With no list at all (nothing
    // probed up yet) it is the fleet's state, answered below as no endpoint (503).
    const backends = this.#d.gateway.backends;
    if (!backends.some((b) => b.models.has(f.model)) && backends.some((b) => b.models.size > 0)) {
      throw new GatewayError('EAR_ERR_MODEL_NOT_FOUND', `The model \`${f.model}\` does not exist.`);
    }
    const req: RoutingInput = {
      model: f.model, sessionId, parentSessionId, promptTokens: f.promptTokens, blockKeys: f.blockKeys, maxTokens: f.maxTokens,
      user: f.user ?? keyUser, ...(exclude.size > 0 ? { exclude } : {})
    };
    // The shared record first, so admission ranks the session by the service every replica saw (as the gateway).
    const shared = this.#d.sessions?.turn(req) ?? null;
    if (shared !== null) await shared.load();
    if (signal.aborted) {
      watch?.abandoned('queued');
      return null;
    }
    const admitted = await this.#admit(req, signal, priorityClass, span === null ? null : span.admission(priorityClass));
    if (admitted === null) {
      watch?.abandoned('queued');
      return null;
    }
    let placement = admitted;
    // Another replica bound the session first: follow it (the admitted placement is undone, not sent).
    if (shared !== null) {
      const { routing, now } = this.#d;
      placement = await shared.placed(admitted, 0, () => {
        const p = routing.route(req, exclude, now(), 0);
        routing.finished(admitted, req, null, false, now());
        routing.started(p, req, now());
        return p;
      });
    }
    if (signal.aborted) {
      this.#d.routing.finished(placement, req, null, false, this.#d.now());
      shared?.completed(this.#d.now());
      watch?.abandoned('queued');
      return null;
    }
    // A migration's KV is not moved here (the proxy sends the request): the target recomputes the prompt, and
    // the session's move is done, so later turns do not wait on it.
    if (placement.migrating === true) this.#d.routing.migrationEnded?.(placement, true, this.#d.now());
    const forward = f.forward ? Buffer.from(f.forward.buffer, f.forward.byteOffset, f.forward.byteLength) : null;
    const endpoints = [endpointOf(placement.backend), ...this.#fallbacks(placement.backend, f.model, exclude)];
    // As serve's route span, with the fallbacks named and whether the proxy's subset applied.
    if (span !== null && span.recording) span.routed({ ...routeFacts(this.#d.config.policy, backends, placement, 0, f.model, exclude), fallbacks: endpoints.length - 1, subsetHint: input.allowed !== null });
    const traced = span === null ? null : { span, watch: watch!, receivedAt: input.receivedAt ?? f0 };
    return new PickedRequest(this.#d, req, placement, endpoints, forward, shared, traced);
  }

  /** Admission as the gateway waits for it; a drop or no candidate is the picker's 503 (no endpoint). */
  async #admit (req: RoutingInput, signal: AbortSignalLike, priorityClass: number, traced: AdmissionTrace | null): Promise<Placement | null> {
    const deps = { state: this.#d.routing, now: this.#d.now, metrics: this.#d.gateway.metrics, decisionSeconds: this.#decisionSeconds };
    try {
      return await waitForAdmission(deps, req, signal, priorityClass, traced, (reason, waitedMs) => {
        if (reason === 'timeout') return new GatewayError('EAR_ERR_QUEUE_TIMEOUT', `the request waited ${Math.round(waitedMs / 1000)} s for admission and timed out; the backends are at capacity`);
        if (reason === 'shutdown') return new GatewayError('EAR_ERR_DRAINING', 'the endpoint picker shut down while the request waited for admission');
        return noEndpoint(req.model);
      });
    } catch (err) {
      throw err instanceof NoCandidateError ? noEndpoint(req.model) : err;
    }
  }

  /**
   * The proxy's next choices should the primary fail: other backends serving the model, least pending prefill
   * first (then fewest in flight). They are only named: the request is recorded where it is served.
   */
  #fallbacks (primary: Backend, model: string, exclude: ReadonlySet<number>): string[] {
    if (this.#d.fallbacks === 0) return [];
    const pending = (b: Backend): number => this.#d.routing.pendingPrefill?.(b) ?? 0;
    return this.#d.gateway.backends
      .filter((b) => b !== primary && b.serves(model) && !exclude.has(b.index))
      .sort((a, b) => pending(a) - pending(b) || a.inFlight - b.inFlight)
      .slice(0, this.#d.fallbacks)
      .map(endpointOf);
  }

  /**
   * A request that is not an inference call (another path, or no body: a model list, a health check through the
   * proxy) has no model to route by: the least busy healthy backend takes it, unrecorded.
   */
  #passthrough (exclude: ReadonlySet<number>): Picked {
    let best: Backend | null = null;
    for (const b of this.#d.gateway.backends) {
      if (b.health !== 'healthy' || b.draining || exclude.has(b.index)) continue;
      if (best === null || b.inFlight < best.inFlight) best = b;
    }
    if (best === null) throw new GatewayError('EAR_ERR_NO_BACKEND', 'no healthy backend among the allowed endpoints');
    return new PassthroughRequest(this.#d, best);
  }
}

function noEndpoint (model: string): GatewayError {
  return new GatewayError('EAR_ERR_NO_BACKEND', `no healthy backend among the allowed endpoints serves the model \`${model}\``);
}

class PassthroughRequest implements Picked {
  readonly kind = 'passthrough';
  readonly endpoints: readonly string[];
  readonly forward = null;
  /** Not an inference call: no span, and the client's own trace headers go through as Envoy has them. */
  readonly traceHeaders = null;
  #done = false;

  constructor (readonly d: PickerDeps, readonly backend: Backend) {
    this.endpoints = [endpointOf(backend)];
    d.gateway.enter(backend);
  }

  served (endpoint: string | null): 'primary' | 'fallback' | 'unlisted' | 'unreported' {
    if (endpoint === null) return 'unreported';
    return endpoint === this.endpoints[0] ? 'primary' : 'unlisted';
  }

  firstToken (): void {}

  finish (): void {
    if (this.#done) return;
    this.#done = true;
    this.d.gateway.exit(this.backend);
  }
}

/** A picked request's spans (tracing on): the server span and its response watch. */
interface PickTrace {
  span: RequestTrace;
  watch: ProxiedTrace;
  /** When the request's headers arrived: TTFT is counted from there, as serve counts it from the request's arrival. */
  receivedAt: number;
}

class PickedRequest implements Picked {
  readonly kind = 'routed';
  #placement: Placement;
  #done = false;
  #firstAt = 0;
  readonly #t0: number;
  readonly traceHeaders: TraceHeaders | null;

  constructor (readonly d: PickerDeps, readonly input: RoutingInput, placement: Placement, readonly endpoints: readonly string[], readonly forward: Buffer | null,
    readonly shared: SharedTurn | null, readonly trace: PickTrace | null) {
    this.traceHeaders = trace === null ? null : trace.watch.headers;
    this.#placement = placement;
    this.#t0 = d.now();
    d.gateway.enter(placement.backend);
    d.gateway.metrics.backend(placement.backend.id).decisions(d.config.policy, placement.reason).inc();
  }

  get backend (): Backend {
    return this.#placement.backend;
  }

  /**
   * After the proxy's fallback the request is recorded on the backend that served it: the primary's placement
   * ends unserved (as a failed attempt does in the gateway) and a retry placement on the server is started.
   */
  served (endpoint: string | null): 'primary' | 'fallback' | 'unlisted' | 'unreported' {
    const relation = this.#served(endpoint);
    this.trace?.watch.served(endpoint, relation);
    return relation;
  }

  #served (endpoint: string | null): 'primary' | 'fallback' | 'unlisted' | 'unreported' {
    if (endpoint === null) return 'unreported';
    const at = this.endpoints.indexOf(endpoint);
    if (at === 0) return 'primary';
    if (this.#done || this.#firstAt > 0) return at > 0 ? 'fallback' : 'unlisted';
    const server = this.d.gateway.backends.find((b) => !b.gone && endpointOf(b) === endpoint);
    if (server === undefined) return at > 0 ? 'fallback' : 'unlisted';
    const { routing, now } = this.d;
    const exclude = new Set<number>();
    for (const b of this.d.gateway.backends) if (b !== server) exclude.add(b.index);
    let next: Placement;
    try {
      next = routing.route(this.input, exclude, now(), 1);
    } catch (err) {
      if (!(err instanceof NoCandidateError)) throw err;
      return at > 0 ? 'fallback' : 'unlisted'; // it no longer serves (down, draining): keep the first record
    }
    const prev = this.#placement;
    routing.finished(prev, this.input, null, false, now());
    this.d.gateway.exit(prev.backend);
    routing.started(next, this.input, now());
    this.d.gateway.enter(next.backend);
    this.d.gateway.metrics.retries.inc();
    this.d.gateway.metrics.backend(next.backend.id).decisions(this.d.config.policy, next.reason).inc();
    this.#placement = next;
    // The session now lives where it was served: the shared binding follows (a host change, not a migration).
    this.shared?.reverted(next.backend.id);
    return at > 0 ? 'fallback' : 'unlisted';
  }

  firstToken (): void {
    if (this.#done || this.#firstAt > 0) return;
    this.#firstAt = this.d.now();
    this.d.routing.firstToken(this.#placement, this.#firstAt);
    this.d.gateway.metrics.backend(this.backend.id).ttft.observe((this.#firstAt - this.#t0) / 1000);
    this.trace?.watch.firstToken(this.#firstAt - this.trace.receivedAt);
  }

  finish (usage: Usage | null, ok: boolean, status = 0, abandoned: 'queued' | 'response' | null = null): void {
    if (this.#done) return;
    this.#done = true;
    const t = this.d.now();
    const b = this.#placement.backend;
    this.d.routing.finished(this.#placement, this.input, usage, ok, t);
    this.shared?.completed(t);
    this.d.gateway.exit(b);
    if (this.trace !== null) {
      if (usage !== null) this.trace.watch.usage(usage);
      if (abandoned !== null) this.trace.watch.abandoned(abandoned);
      this.trace.span.end(status, abandoned !== null, null);
    }
    if (!ok) return;
    const series = this.d.gateway.metrics.backend(b.id);
    series.e2e.observe((t - this.#t0) / 1000);
    const out = usage?.completionTokens ?? 0;
    if (this.#firstAt > 0 && out > 1) series.tpot.observe((t - this.#firstAt) / 1000 / (out - 1));
  }
}
