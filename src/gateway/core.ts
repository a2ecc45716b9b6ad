// The process core (docs/architecture.md#processes-and-threads): what every door of one process shares, built
// once. The backends (fleet), explicit contexts and the response origins in the session store, API keys and rate
// limits (the gate), the admin token, the metrics, and one request pipeline whose events metrics and spans follow.
// Doors sit on top and take it: the uWS server (server.ts) and Envoy's ext_proc (src/epp/). A request that comes
// in at either door is the same process's: its session, its Responses continuation, its rate limit.
import { performance } from 'node:perf_hooks';
import { RESPONSE_ORIGIN_TTL_S, UPKEEP_EVERY_MS } from '../core/defaults.js';
import { ResponseOrigins } from '../request/response-origin.js';
import { registerAdmissionMetrics } from '../telemetry/admission-metrics.js';
import type { Backend } from '../fleet/backends.js';
import { BackendFleet, type ReadinessCondition } from '../fleet/fleet.js';
import type { GatewayConfig } from '../config/index.js';
import { GatewayMetrics } from '../telemetry/metrics.js';
import type { RoutingState } from '../fleet/routing-port.js';
import { ContextRegistry } from './contexts.js';
import type { SessionStore } from '../store/session-store.js';
import { registerClientIoMetrics } from './uws-io.js';
import { registerUpstreamSocketMetrics } from '../upstream/upstream-metrics.js';
import { registerFaultMetrics } from '../request/faults.js';
import type { SharedSessions } from '../store/shared-sessions.js';
import { KvTransferStep } from '../request/kv-transfer-step.js';
import { ClientGate, type AdmittedClient, type ClientLimits, type GatedRoute } from '../request/client-gate.js';
import { admitClient } from '../request/accept.js';
import { AdminToken } from '../request/credentials.js';
import { kvTransfersFor } from '../migration/transfers-for.js';
import type { Tracing } from '../telemetry/tracing.js';
import { subscribeRequestSpans } from '../telemetry/request-spans.js';
import { Pipeline, type FeatureFn } from '../request/pipeline.js';
import { subscribeRequestMetrics } from '../telemetry/request-metrics.js';
import { subscribeKvTransferMetrics } from '../telemetry/kv-transfer-metrics.js';

export interface CoreDeps {
  config: Readonly<GatewayConfig>;
  /** The routing state over `backends`: the fleet's live list, which it fills (and changes on reloads) afterwards. */
  state: (backends: readonly Backend[]) => RoutingState;
  features: FeatureFn;
  /** Time source in ms (performance.now by default). */
  now?: () => number;
  /** Session state shared with other replicas (`--session-store redis://…`); none with `memory`. */
  sessions?: SharedSessions | null;
  /** Where explicit contexts and response origins are recorded (--session-store); default: an in-process memory store. */
  sessionStore?: SessionStore;
  /** Wall clock (ms) for contexts' creation and expiry (Date.now by default; tests pass a fake one). */
  clock?: () => number;
  /** A request of a session completed: its model, the engine path and the body forwarded (no kv_transfer_params of the client's or a connector's). */
  onSessionCompleted?: (sessionId: string, model: string, path: string, body: Buffer) => void;
  /** Spans for requests (src/telemetry/); null or absent: tracing is off and costs a null check. */
  tracing?: Tracing | null;
  /**
   * A condition besides the process's own (not draining, a healthy backend) that /ready reports: an active-passive
   * follower is not ready (src/ha/). Read on every probe; its fields other than `ready` go into the answer's body.
   */
  readiness?: () => ReadinessCondition;
}

export type { ReadinessCondition };

export class ProcessCore {
  readonly config: Readonly<GatewayConfig>;
  readonly now: () => number;
  /** Wall clock (ms): contexts' times, rate-limit headers. */
  readonly clock: () => number;
  readonly metrics = new GatewayMetrics();
  /** The process's backends (fleet.ts). A backend's index is the pod row it leases in the shared tables. */
  readonly fleet: BackendFleet;
  readonly backends: readonly Backend[];
  readonly state: RoutingState;
  /** Explicit contexts (POST /v1/context): the registry wraps the routing state to keep a context's session bound and alive. */
  readonly contexts: ContextRegistry;
  /** API keys (compared in constant time) and rate limits, for every /v1 route of every door (client-gate.ts). */
  readonly gate: ClientGate;
  /** Compared in constant time (credentials.ts); with no token configured nothing is admitted. */
  readonly adminToken: AdminToken;
  /** The one request pipeline: every door runs its requests through it. */
  readonly pipeline: Pipeline;
  readonly sessions: SharedSessions | null;
  #draining = false;
  #inFlight = 0;
  #idle: (() => void) | null = null;
  readonly #stopAccepting: Array<() => void> = [];
  readonly #unsubscribe: Array<() => void>;
  #upkeep: NodeJS.Timeout | null = null;
  #closing: Promise<void> | null = null;

  constructor (deps: CoreDeps) {
    const config = this.config = deps.config;
    const now = this.now = deps.now ?? (() => performance.now());
    this.clock = deps.clock ?? Date.now;
    const metrics = this.metrics;
    registerClientIoMetrics(metrics.registry);
    registerUpstreamSocketMetrics(metrics.registry);
    registerFaultMetrics(metrics.registry);
    // Draining backends stay in the list until their requests end; a row is released when its backend has gone.
    this.fleet = new BackendFleet({ config, state: deps.state, onGone: (id) => metrics.removeBackend(id), now, readiness: deps.readiness });
    const { backends, state } = this.fleet;
    this.backends = backends;
    this.state = state;
    const release = (b: Backend): void => this.fleet.release(b);
    this.contexts = new ContextRegistry({ maxContexts: config.maxContexts, sessionIdleMs: config.sessionIdleMs, registry: metrics.registry, store: deps.sessionStore, clock: deps.clock, now });
    this.contexts.attach(state);
    // A request whose body names no OpenAI `user` counts against its API key's id (an HMAC of the key, never the key).
    this.gate = new ClientGate(config, metrics.registry, now);
    this.adminToken = new AdminToken(config.adminToken);
    this.sessions = deps.sessions ?? null;
    this.pipeline = new Pipeline({
      policy: config.policy, maxAttempts: config.maxAttempts, maxResumes: config.maxResumes, maxResumeBytes: config.maxResumeBytes,
      maxRetentionTtlMs: config.maxRetentionTtlMs, state, features: deps.features, backends, sessions: this.sessions,
      kvTransfers: new KvTransferStep(kvTransfersFor(config), state, now, release), now,
      hold: (b) => this.fleet.hold(b), release, onSessionCompleted: deps.onSessionCompleted,
      // With a shared store, the origins every replica recorded; else this process's own, whichever door took them.
      responses: new ResponseOrigins({ store: this.contexts.store, ttlSeconds: RESPONSE_ORIGIN_TTL_S })
    });
    // The path publishes; metrics (and spans, with tracing on) subscribe, once for every door.
    this.#unsubscribe = [subscribeRequestMetrics(this.pipeline, metrics), subscribeKvTransferMetrics(this.pipeline, metrics.registry, () => state.migrationStats?.() ?? null)];
    if (deps.tracing != null) this.#unsubscribe.push(subscribeRequestSpans(this.pipeline, deps.tracing));
    registerAdmissionMetrics(metrics.registry, () => state.admissionStats(now()));
    metrics.registerEppAliases({
      pool: () => config.discovery?.inferencePool ?? '',
      backends: () => backends.map((b) => ({ id: b.id, ready: b.health === 'healthy' && !b.draining, inFlight: b.inFlight, load: b.engineLoad })),
      queueDepthByLevel: () => state.admissionStats(now()).depthByLevel
    });
  }

  /** Probes the backends once (the first health round) and starts the upkeep. */
  async start (): Promise<void> {
    await this.fleet.start();
    // The upkeep: releases come with first tokens, ends and scrapes, this catches timeouts and starvation; and it
    // expires idle sessions a bounded slice at a time, so the session table follows the live sessions at any rate.
    this.#upkeep = setInterval(() => { this.state.tick(this.now()); }, UPKEEP_EVERY_MS);
    this.#upkeep.unref();
  }

  /** Shutting down: doors refuse new requests (503 EAR_ERR_DRAINING). */
  get draining (): boolean {
    return this.#draining;
  }

  /** What /ready answers: not draining, a healthy backend, and `readiness` of the deps (active-passive). */
  readiness (): ReadinessCondition {
    return this.fleet.readiness(this.#draining);
  }

  /** A door's way to stop taking connections, called when the process drains. */
  onDrain (stopAccepting: () => void): void {
    this.#stopAccepting.push(stopAccepting);
  }

  /** Counts `p` in flight until it settles: the drain waits for it (requests waiting for admission included). */
  track (p: Promise<unknown>): void {
    this.#inFlight++;
    void p.finally(() => { if (--this.#inFlight === 0 && this.#idle) this.#idle(); });
  }

  /**
   * A request of a pipeline route (`route`: its engine path, or /v1/context) that its door answered `status`
   * before the pipeline took it (refused: key, rate limit, headers, body): counted once, as the pipeline counts
   * the rest at `done` (ear_requests_total, no backend).
   */
  refused (route: string, status: number): void {
    this.metrics.requests.labels(route, String(status), '').inc();
  }

  /** The client at the gate (client-gate.ts): its API key and request rate limit; throws the refusal (401, 429). */
  admitClient (route: GatedRoute, auth: string, address: () => string, limited: (l: ClientLimits) => void): AdmittedClient {
    return admitClient(this.gate, route, auth, address, limited);
  }

  /** The client credentials and limits of `config` from now on: API keys, rate limits, the admin token (SIGHUP). */
  reconfigure (next: Readonly<GatewayConfig>): void {
    this.gate.reconfigure(next);
    this.adminToken.replace(next.adminToken);
  }

  /** Stops accepting at every door, lets in-flight requests finish (up to drainTimeoutMs), then closes everything. */
  close (): Promise<void> {
    this.#closing ??= (async () => {
      this.#draining = true;
      for (const stop of this.#stopAccepting) stop();
      // Requests waiting for admission are in flight too: a healthy backend will serve them as the running ones
      // end, so they drain with the rest; only what still waits at the drain deadline is answered 503.
      if (this.#inFlight > 0) {
        await new Promise<void>((resolve) => {
          this.#idle = resolve;
          setTimeout(resolve, this.config.drainTimeoutMs).unref();
        });
      }
      if (this.#upkeep !== null) clearInterval(this.#upkeep);
      this.state.dropAll('shutdown', this.now());
      await this.fleet.close();
      await this.contexts.close();
      for (const u of this.#unsubscribe) u();
    })();
    return this.#closing;
  }
}
