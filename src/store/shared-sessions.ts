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
// Where the local session table is (`LocalSessions`): on the main thread, the routing host itself (read and written
// at once, as above); on a data-plane thread (httpThreads ≥ 2) the main thread's, which alone writes it. There a
// thread's SharedTurn talks to the store through a client of its own (the round trips load no other thread), and
// an adopt is a message to the main thread, sent before the thread's next submit or route and so applied before
// that decision (one port, in order); whether the adopted host is ready here the thread tells from its copy of the
// backend list. The local figures (a bind's seed, addService's critical path and context) it asks the main thread
// for: a completed call's after the main thread recorded its end (the question follows the `finished` report).
//
// Limits: context tokens are merged as a max too (a context a client compacts keeps its old length until it
// grows past it); a Redis that lost its data gets back the service of calls made after the loss (and the
// figures a new bind seeds), so its attained service may stay below a replica's local one, which keeps the max.
import { NoCandidateError } from '../core/policy.js';
import type { HostRequest, RoutingHost } from '../core/routing-host.js';
import type { SessionStore, SharedSession, SessionSeed } from './session-store.js';

/** A session's figures in the local table, as a bind seeds them and addService reports them. */
export interface LocalFigures {
  attainedMs: number;
  criticalPathMs: number;
  contextTokens: number;
}

/** The local session table as a SharedTurn uses it: the routing host's (main thread) or its owner's (a data-plane thread). */
export interface LocalSessions {
  /** The table is another thread's: `figures` answers by message (later). */
  readonly remote: boolean;
  /** Whether `backendId` names a backend that is ready here (a shared host to follow). */
  ready (backendId: string): boolean;
  /** Merges a shared record into the local table; true if its host is a ready backend here (the local host now). */
  adopt (sessionId: string, s: SharedSession): boolean;
  /** The session's figures in the local table (undefined: not there), after every earlier call of this side applied. */
  figures (sessionId: string): LocalFigures | undefined | Promise<LocalFigures | undefined>;
}

export interface SharedSessionsOptions {
  store: SessionStore;
  /** The gateway's clock (ms since the epoch: last migration times are compared across replicas). */
  now: () => number;
  /** The routing state (TableRouting), made by startGateway after this object (so a getter): the main thread's table. */
  routing?: () => { readonly host: RoutingHost };
  /** Local TTL of a session created by adopting a shared record (the gateway's sessionIdleMs); with `routing`. */
  sessionTtlMs?: number;
  /** Another side's table instead of `routing` (a data-plane thread's owner: gateway/owner-sessions.ts). */
  local?: LocalSessions;
}

export class SharedSessions {
  readonly store: SessionStore;
  /** Writes lost to another replica's (bind: a first writer; cas: a host change), after which this one followed. */
  readonly follows = { bind: 0, cas: 0 };
  /** Requests routed again to follow the winner's host. */
  rerouted = 0;
  readonly local: LocalSessions;
  readonly now: () => number;

  constructor (opts: SharedSessionsOptions) {
    this.store = opts.store;
    this.now = opts.now;
    if (opts.local !== undefined) this.local = opts.local;
    else if (opts.routing !== undefined) this.local = new HostSessions(opts.routing, opts.sessionTtlMs ?? 0, opts.now);
    else throw new TypeError('SharedSessions needs the routing state or another side\'s local sessions');
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

  /** Merges a shared record into the local table; true if its host is now the local host. */
  adopt (sessionId: string, s: SharedSession): boolean {
    return this.local.adopt(sessionId, s);
  }

  close (): Promise<void> {
    return this.store.close();
  }
}

/** The main thread's side: the routing host's own table, read and written at once. */
export class HostSessions implements LocalSessions {
  readonly remote = false;
  readonly #routing: () => { readonly host: RoutingHost };
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor (routing: () => { readonly host: RoutingHost }, ttlMs: number, now: () => number) {
    this.#routing = routing;
    this.#ttlMs = ttlMs;
    this.#now = now;
  }

  /** The pod row of a backend that is ready here; null for none, one not known here, or one not ready. */
  readyRow (backendId: string | null): number | null {
    if (backendId === null) return null;
    const host = this.#routing().host;
    const row = host.rows.rowOf(backendId);
    return row !== undefined && host.pods.state(row) === 'ready' ? row : null;
  }

  ready (backendId: string): boolean {
    return this.readyRow(backendId) !== null;
  }

  adopt (sessionId: string, s: SharedSession): boolean {
    return this.#routing().host.adoptShared(sessionId, {
      hostRow: this.readyRow(s.host), attainedMs: s.attainedMs, criticalPathMs: s.criticalPathMs,
      lastMigration: s.lastMigration, contextTokens: s.contextTokens
    }, this.#now(), this.#ttlMs);
  }

  figures (sessionId: string): LocalFigures | undefined {
    const host = this.#routing().host;
    const s = host.sessions.get(host.sessionKey(sessionId));
    return s === undefined ? undefined : { attainedMs: s.attained, criticalPathMs: s.criticalPath, contextTokens: s.contextTokens };
  }
}

/** A bind's seed: the local figures, or none. */
function seedOf (f: LocalFigures | undefined): SessionSeed {
  return f === undefined ? {} : { attainedMs: f.attainedMs, criticalPathMs: f.criticalPathMs, contextTokens: f.contextTokens };
}

export class SharedTurn {
  readonly #s: SharedSessions;
  readonly #id: string;
  /** The shared host as last seen: a backend id, null (unbound, or no record), undefined (the store did not answer). */
  #known: string | null | undefined = undefined;
  #sentAt = 0;
  /** A data-plane thread's: the local figures asked for when the load found no record (a bind will need them). */
  #seed: Promise<LocalFigures | undefined> | null = null;

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
    else if (this.#s.local.remote) {
      // A bind follows: asked now, the answer comes with the decision (same batches each way), not a round trip after it.
      this.#seed = Promise.resolve(this.#s.local.figures(this.#id));
    }
  }

  /**
   * After a routing decision, before dispatch: makes the decision the shared binding, or follows the binding
   * that won (`again` routes the request again, once, after the winner was adopted). Returns the placement to send.
   */
  async placed<P extends { readonly backend: { readonly id: string }; readonly dispatchedAt?: number }> (p: P, attempt: number, again: () => P | Promise<P>): Promise<P> {
    let out = p;
    if (await this.#settle(p.backend.id, attempt)) {
      try {
        const a = again();
        out = a instanceof Promise ? await a : a;
        this.#s.rerouted++;
      } catch (err) {
        if (!(err instanceof NoCandidateError)) throw err; // the pods changed meanwhile: keep the first decision
      }
    }
    // Service counts from where the local table counts it: the dispatch (at admission, before the bind's round trip).
    this.#sentAt = out.dispatchedAt !== undefined && out.dispatchedAt > 0 ? out.dispatchedAt : this.#s.now();
    return out;
  }

  /** The seed of a bind: the local figures (asked at the load on a data-plane thread). */
  #seedOf (): SessionSeed | Promise<SessionSeed> {
    const pending = this.#seed;
    this.#seed = null;
    const f = pending ?? this.#s.local.figures(this.#id);
    return f instanceof Promise ? f.then(seedOf, () => ({})) : seedOf(f);
  }

  /** True if the local table now names another backend (the winner's) and the request should be routed again. */
  async #settle (chosen: string, attempt: number): Promise<boolean> {
    const { store, local } = this.#s;
    if (this.#known === chosen) return false;
    if (this.#known === undefined) {
      const seed = this.#seedOf();
      if (seed instanceof Promise) void seed.then((x) => store.bind(this.#id, chosen, x));
      else void store.bind(this.#id, chosen, seed);
      return false;
    }
    // Twice at most: a host change that finds the record gone binds instead.
    for (let i = 0; i < 2; i++) {
      let session: SharedSession;
      if (this.#known === null) {
        const seed = this.#seedOf();
        const r = await store.bind(this.#id, chosen, seed instanceof Promise ? await seed : seed);
        if (!r.ok) return false;
        if (r.value.won) {
          this.#known = chosen;
          return false;
        }
        session = r.value.session;
        this.#s.follows.bind++;
      } else {
        const from: string = this.#known;
        const migration = attempt === 0 && local.ready(from);
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
    const serviceMs = Math.max(0, now - this.#sentAt);
    const f = this.#s.local.figures(this.#id);
    if (f instanceof Promise) f.then((x) => this.#addService(serviceMs, x), () => {});
    else this.#addService(serviceMs, f);
  }

  #addService (serviceMs: number, local: LocalFigures | undefined): void {
    const s = this.#s;
    const id = this.#id;
    s.store.addService(id, {
      serviceMs,
      criticalPathMs: local === undefined ? null : local.criticalPathMs,
      contextTokens: local === undefined || local.contextTokens === 0 ? null : local.contextTokens
    }).then((r) => { if (r.ok) s.adopt(id, r.value); }, () => {});
  }
}

