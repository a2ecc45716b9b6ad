// Session state shared by replicas of `ear serve` (docs/architecture.md#sessions-across-replicas): the request
// path's side of a SessionStore (src/store/session-store.ts has the contract). With `--session-store memory`
// (the default) none of this exists and the request path does no extra work: the local WASM session table is
// the session state. With `redis://…` each request with a session id is one SharedTurn:
//
//   before routing   load(id)                 the shared record → the local table (RoutingHost.adoptShared):
//                                             max of the figures, and its host if that is a ready backend here
//   after deciding   nothing, if the decision is the shared host (a session's later turns, under a policy
//                    that reads the session's host). Otherwise, before dispatch:
//                      no host yet        → bind(id, chosen, local figures): the first writer wins
//                      another host       → casHost(id, it, chosen): a retry elsewhere or a host that is not
//                                           ready here is not a migration; a policy's move off a ready host is
//                    A lost write names the winner's host: it is adopted into the local table and the request
//                    is routed again, so it follows the winner (the policy sees the winner as the session's
//                    host). It is routed again once at most; what that gives is what is sent.
//   on completion    addService(id, service, critical path, context), not awaited; the reply's totals are
//                    adopted when they come back
//
// The race of two replicas that receive the first two turns of a new session at once: both load nothing, both
// decide on their own, and both bind before dispatching. Redis runs the two binds one after the other (one Lua
// script on one key): the first binds, the second gets the first's host back and its request follows it. Both
// turns reach one backend, at the price of one round trip on a session's first turn; binding before the
// decision would need a backend to bind to, i.e. the decision. Later turns pay one round trip (the load).
//
// The store is a hint: a reply that is degraded (down, timeout, error; the store bounds every call and counts
// it) leaves the request to the local table. A bind is still sent, not awaited, when the load was not answered:
// a store that is down keeps it for replay, which is how a restarted Redis learns the bindings made meanwhile.
// Host ids in the store are backend ids; locally they are pod rows (PodRows.rowOf).
//
// Limits: context tokens are merged as a max too (a context a client compacts keeps its old length until it
// grows past it); a Redis that lost its data gets back the service of calls made after the loss (and the
// figures a new bind seeds), so its attained service may stay below a replica's local one, which keeps the max.
import { NoCandidateError } from '../core/policy.js';
import type { HostRequest, RoutingHost } from '../core/routing-host.js';
import type { SessionRecord } from '../core/session-table.js';
import type { SessionStore, SharedSession, SessionSeed } from './session-store.js';

export interface SharedSessionsOptions {
  store: SessionStore;
  /** The routing state (TableRouting), made by startGateway after this object (so a getter). */
  routing: () => { readonly host: RoutingHost };
  /** Local TTL of a session created by adopting a shared record (the gateway's sessionIdleMs). */
  sessionTtlMs: number;
  /** The gateway's clock (ms since the epoch: last migration times are compared across replicas). */
  now: () => number;
}

export class SharedSessions {
  readonly store: SessionStore;
  /** Writes lost to another replica's (bind: a first writer; cas: a host change), after which this one followed. */
  readonly follows = { bind: 0, cas: 0 };
  /** Requests routed again to follow the winner's host. */
  rerouted = 0;
  readonly #routing: () => { readonly host: RoutingHost };
  readonly #ttlMs: number;
  readonly now: () => number;

  constructor (opts: SharedSessionsOptions) {
    this.store = opts.store;
    this.#routing = opts.routing;
    this.#ttlMs = opts.sessionTtlMs;
    this.now = opts.now;
  }

  /** The shared part of one request: null without a session id. */
  turn (input: HostRequest): SharedTurn | null {
    return input.sessionId === null ? null : new SharedTurn(this, input.sessionId);
  }

  /** Loads the shared record into the local table (the admin endpoint, so both replicas show the shared figures). */
  async refresh (sessionId: string): Promise<void> {
    const r = await this.store.load(sessionId);
    if (r.ok && r.value !== null) this.adopt(sessionId, r.value);
  }

  /** The pod row of a backend that is ready here; null for none, one not known here, or one not ready. */
  readyRow (backendId: string | null): number | null {
    if (backendId === null) return null;
    const host = this.#routing().host;
    const row = host.rows.rowOf(backendId);
    return row !== undefined && host.pods.state(row) === 'ready' ? row : null;
  }

  /** Merges a shared record into the local table; true if its host is now the local host. */
  adopt (sessionId: string, s: SharedSession): boolean {
    return this.#routing().host.adoptShared(sessionId, {
      hostRow: this.readyRow(s.host), attainedMs: s.attainedMs, criticalPathMs: s.criticalPathMs,
      lastMigration: s.lastMigration, contextTokens: s.contextTokens
    }, this.now(), this.#ttlMs);
  }

  local (sessionId: string): SessionRecord | undefined {
    const host = this.#routing().host;
    return host.sessions.get(host.sessionKey(sessionId));
  }

  seed (sessionId: string): SessionSeed {
    const s = this.local(sessionId);
    return s === undefined ? {} : { attainedMs: s.attained, criticalPathMs: s.criticalPath, contextTokens: s.contextTokens };
  }

  close (): Promise<void> {
    return this.store.close();
  }
}

export class SharedTurn {
  readonly #s: SharedSessions;
  readonly #id: string;
  /** The shared host as last seen: a backend id, null (unbound, or no record), undefined (the store did not answer). */
  #known: string | null | undefined = undefined;
  #sentAt = 0;

  constructor (s: SharedSessions, sessionId: string) {
    this.#s = s;
    this.#id = sessionId;
  }

  /** Before routing: the shared record into the local table. Bounded by the store's command timeout. */
  async load (): Promise<void> {
    const r = await this.#s.store.load(this.#id);
    if (!r.ok) return;
    this.#known = r.value?.host ?? null;
    if (r.value !== null) this.#s.adopt(this.#id, r.value);
  }

  /**
   * After a routing decision, before dispatch: makes the decision the shared binding, or follows the binding
   * that won (`again` routes the request again, once, after the winner was adopted). Returns the placement to send.
   */
  async placed<P extends { readonly backend: { readonly id: string }; readonly dispatchedAt?: number }> (p: P, attempt: number, again: () => P): Promise<P> {
    let out = p;
    if (await this.#settle(p.backend.id, attempt)) {
      try {
        out = again();
        this.#s.rerouted++;
      } catch (err) {
        if (!(err instanceof NoCandidateError)) throw err; // the pods changed meanwhile: keep the first decision
      }
    }
    // Service counts from where the local table counts it: the dispatch (at admission, before the bind's round trip).
    this.#sentAt = out.dispatchedAt !== undefined && out.dispatchedAt > 0 ? out.dispatchedAt : this.#s.now();
    return out;
  }

  /** True if the local table now names another backend (the winner's) and the request should be routed again. */
  async #settle (chosen: string, attempt: number): Promise<boolean> {
    const { store } = this.#s;
    if (this.#known === chosen) return false;
    if (this.#known === undefined) {
      void store.bind(this.#id, chosen, this.#s.seed(this.#id));
      return false;
    }
    // Twice at most: a host change that finds the record gone binds instead.
    for (let i = 0; i < 2; i++) {
      let session: SharedSession;
      if (this.#known === null) {
        const r = await store.bind(this.#id, chosen, this.#s.seed(this.#id));
        if (!r.ok) return false;
        if (r.value.won) {
          this.#known = chosen;
          return false;
        }
        session = r.value.session;
        this.#s.follows.bind++;
      } else {
        const from: string = this.#known;
        const migration = attempt === 0 && this.#s.readyRow(from) !== null;
        const r = await store.casHost(this.#id, from, chosen, this.#s.now(), { migration });
        if (!r.ok) return false;
        if (r.value.won) {
          this.#known = chosen;
          return false;
        }
        if (r.value.session === null) {
          this.#known = null;
          continue;
        }
        session = r.value.session;
        this.#s.follows.cas++;
      }
      this.#known = session.host;
      if (session.host === null) continue;
      if (session.host === chosen) return false;
      return this.#s.adopt(this.#id, session);
    }
    return false;
  }

  /**
   * A failed migration put the request and the session back on `to`, its source (RoutingHost.migrationEnded):
   * the shared binding follows, as a host change that is not a migration (the move's cool-down stands). Not
   * awaited: if another replica moved the session meanwhile, its binding stands and the next turn follows it.
   */
  reverted (to: string): void {
    const from = this.#known;
    if (from === undefined || from === null || from === to) return;
    this.#known = to;
    this.#s.store.casHost(this.#id, from, to, this.#s.now(), { migration: false }).then(() => {}, () => {});
  }

  /** The attempt ended (any outcome, as the local table counts it): its service goes to the shared record. */
  completed (now: number): void {
    const s = this.#s;
    const local = s.local(this.#id);
    const id = this.#id;
    s.store.addService(id, {
      serviceMs: Math.max(0, now - this.#sentAt),
      criticalPathMs: local === undefined ? null : local.criticalPath,
      contextTokens: local === undefined || local.contextTokens === 0 ? null : local.contextTokens
    }).then((r) => { if (r.ok) s.adopt(id, r.value); }, () => {});
  }
}
