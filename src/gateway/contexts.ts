// Explicit contexts (issue 11 item 4): KV a client keeps warm on purpose. POST /v1/context prefills a prompt
// on one engine (context-prefill.ts) and registers it here; requests that carry the context's id as their
// session id (`x-session-id`) are then routed as that session, whose host is the context's engine.
//
// The registry (this file): the live contexts of this gateway, bounded (maxContexts; a create beyond it is
// refused with 429 EAR_ERR_CONTEXTS_FULL), each ending at its TTL. Expiry is a timer sweep over a min-heap of
// expiry times (at most SWEEP_BUDGET a tick, so a burst of expiries never blocks the loop) plus a lazy check
// on every read; both count in ear_contexts_expired_total. A deleted context leaves a stale heap entry that
// the sweep skips; the heap is rebuilt when stale entries outnumber live ones, so it stays O(live).
//
// Each record also goes to the SessionStore (createContext with the TTL), so replicas sharing a Redis store
// answer GET/DELETE for contexts another replica made (without the KV location: the block keys stay local).
// Without an injected store the registry makes its own `memory` store.
//
// The context's session in the session table: held with idle TTL ≥ the context's remaining TTL, so it does
// not idle-expire first. Every routed request of the session resets its TTL to sessionIdleMs (the Router's
// upsert), so the registry is a route hook of the routing state (attach()): after a context session's request is
// routed, its TTL is put back to the remaining context TTL, and before it, a session the table lost (evicted at
// its bound, or unbound when its pod left) is bound to the context's engine again.
// On DELETE or expiry the session is not removed: its TTL goes back to sessionIdleMs from its last activity,
// and it ends as any idle session does. The KV is still on the engine until the engine evicts it, so a client
// that keeps using the id gets the affinity that is still worth something, and a request in flight keeps a
// consistent session record (removing it under an in-flight request would lose that request's bookkeeping).
import { Counter, Gauge, type Registry } from 'prom-client';
import { randomBytes } from 'node:crypto';
import type { Backend } from '../fleet/backends.js';
import type { ContextSessions, RouteHook } from '../fleet/routing-port.js';
import { createSessionStore } from '../store/create.js';
import type { SessionStore } from '../store/session-store.js';

export const CONTEXT_ID_PREFIX = 'ctx-';
/** Expired contexts removed per sweep tick at most; the rest go on the next tick (or lazily, when read). */
const SWEEP_BUDGET = 4096;

export interface ContextEntry {
  readonly id: string;
  readonly model: string;
  /** Backend id of the engine that prefilled it. */
  readonly backendId: string;
  readonly promptTokens: number;
  /** What the engine reported as cached when it prefilled (0 when it reported no prompt_tokens_details, as vLLM does for 0). */
  readonly cachedTokens: number;
  /** Chained keys of the prompt's full blocks (gateway keys), for the KV-location lookup. */
  readonly blockKeys: BigUint64Array;
  /** Wall clock, ms. */
  readonly createdAt: number;
  readonly expiresAt: number;
}

export type KvTier = 'gpu' | 'cpu' | 'assumed' | 'evicted' | 'unknown';

export interface KvLocation {
  tier: KvTier;
  blocks_gpu: number;
  blocks_offloaded: number;
  blocks_total: number;
}

export interface ContextRegistryOptions {
  maxContexts: number;
  /** The gateway's idle TTL for sessions (ms): what a context's session goes back to when the context ends. */
  sessionIdleMs: number;
  registry: Registry;
  /** Where records are shared; default: a `memory` store made here. */
  store?: SessionStore;
  /** Wall clock in ms for created/expires (Date.now). */
  clock?: () => number;
  /** The gateway's clock (ms) for the session table. */
  now: () => number;
  /** Sweep period (ms); 0 = no timer (tests call sweep()). Default 1000. */
  sweepIntervalMs?: number;
}

export class ContextRegistry implements RouteHook {
  readonly store: SessionStore;
  readonly maxContexts: number;
  readonly #ownStore: boolean;
  readonly #live = new Map<string, ContextEntry>();
  /** Min-heap of [expiresAt, id]; entries whose id is gone or re-created are stale. */
  #heap: Array<[number, string]> = [];
  /** Creations between the bound check and register(): they count against the bound. */
  #pending = 0;
  readonly #clock: () => number;
  readonly #now: () => number;
  readonly #idleMs: number;
  #state: ContextSessions | null = null;
  readonly #timer: NodeJS.Timeout | null;
  readonly created: Counter;
  readonly deleted: Counter;
  readonly expired: Counter;
  readonly rejected: Counter<'reason'>;

  constructor (opts: ContextRegistryOptions) {
    this.maxContexts = opts.maxContexts;
    this.#clock = opts.clock ?? Date.now;
    this.#now = opts.now;
    this.#idleMs = opts.sessionIdleMs;
    this.#ownStore = opts.store === undefined;
    // The store's own bound is above ours: the registry refuses (429) before the store would evict.
    this.store = opts.store ?? createSessionStore({ kind: 'memory' }, { memory: { maxContexts: opts.maxContexts + 1024, clock: this.#clock } });
    const registers = [opts.registry];
    this.created = new Counter({ name: 'ear_contexts_created_total', help: 'Explicit contexts created (prefilled and registered).', registers });
    this.deleted = new Counter({ name: 'ear_contexts_deleted_total', help: 'Explicit contexts ended by DELETE.', registers });
    this.expired = new Counter({ name: 'ear_contexts_expired_total', help: 'Explicit contexts ended by their TTL.', registers });
    this.rejected = new Counter({ name: 'ear_contexts_rejected_total', help: 'Context creations refused by the gateway (full: at maxContexts; failed: prefill or store failed).', labelNames: ['reason'], registers });
    const live = this.#live;
    new Gauge({ name: 'ear_contexts', help: 'Explicit contexts live in this gateway.', registers, collect () { this.set(live.size); } });
    const every = opts.sweepIntervalMs ?? 1000;
    this.#timer = every > 0 ? setInterval(() => this.sweep(), every) : null;
    this.#timer?.unref();
  }

  get size (): number {
    return this.#live.size;
  }

  /** Hooks into the gateway's routing state so a context's session keeps its host and outlives idle expiry (see the header). */
  attach (state: ContextSessions): void {
    this.#state = state;
    state.addRouteHook?.(this);
  }

  /** A new id: `ctx-` and 24 random hex digits (96 bits: guessing a live one is hopeless). */
  newId (): string {
    return CONTEXT_ID_PREFIX + randomBytes(12).toString('hex');
  }

  /** Reserves a slot for a creation; false at the bound (counted). Pair with register() or unreserve(). */
  reserve (): boolean {
    this.sweep();
    if (this.#live.size + this.#pending >= this.maxContexts) {
      this.rejected.inc({ reason: 'full' });
      return false;
    }
    this.#pending++;
    return true;
  }

  unreserve (): void {
    this.#pending--;
  }

  /** The prefilled context goes live (its slot was reserved). Stores it; a store that is down is counted by the store, not fatal. */
  async register (e: ContextEntry, backend: Backend, ttlSeconds: number): Promise<void> {
    this.#pending--;
    this.#live.set(e.id, e);
    this.#push([e.expiresAt, e.id]);
    this.created.inc();
    this.#state?.holdSession?.(e.id, backend, this.#sessionTtlMs(e), this.#now());
    await this.store.createContext(e.id, { backendId: e.backendId, sessionId: e.id, model: e.model, tokens: e.promptTokens, createdAt: e.createdAt }, ttlSeconds).catch(() => {});
  }

  /** A live context of this gateway (an expired one ends now). */
  local (id: string): ContextEntry | undefined {
    const e = this.#live.get(id);
    if (e === undefined) return undefined;
    if (e.expiresAt <= this.#clock()) {
      this.#end(e, true);
      return undefined;
    }
    return e;
  }

  /** A context made by another replica sharing the store: what the store knows (no block keys). */
  async shared (id: string): Promise<{ model: string; backendId: string | null; promptTokens: number; createdAt: number; expiresAt: number } | null> {
    if (!id.startsWith(CONTEXT_ID_PREFIX) || !this.store.shared) return null;
    const r = await this.store.getContext(id).catch(() => null);
    if (r === null || !r.ok || r.value === null) return null;
    const { record, ttlMs } = r.value;
    return { model: record.model, backendId: record.backendId, promptTokens: record.tokens, createdAt: record.createdAt, expiresAt: this.#clock() + ttlMs };
  }

  /** DELETE: true if there was a context (here or in the shared store). */
  async delete (id: string): Promise<boolean> {
    const e = this.local(id);
    if (e !== undefined) this.#end(e, false);
    const r = await this.store.deleteContext(id).catch(() => null);
    const fromStore = r !== null && r.ok && r.value && this.store.shared;
    if (e === undefined && !fromStore) return false;
    if (e === undefined) this.deleted.inc();
    return true;
  }

  /** Ends the contexts past their TTL, at most SWEEP_BUDGET of them; returns how many. */
  sweep (): number {
    const now = this.#clock();
    let n = 0;
    // this.#heap each time round: ending a context may rebuild it.
    while (this.#heap.length > 0 && this.#heap[0][0] <= now && n < SWEEP_BUDGET) {
      const [at, id] = this.#pop();
      const e = this.#live.get(id);
      if (e !== undefined && e.expiresAt === at) {
        this.#end(e, true);
        n++;
      }
    }
    return n;
  }

  /** The session's idle TTL while the context lives: its remaining TTL, never below the gateway's idle TTL. */
  #sessionTtlMs (e: ContextEntry): number {
    return Math.max(this.#idleMs, e.expiresAt - this.#clock());
  }

  /** Keeps a routed context session's TTL at the context's (called after the Router reset it). */
  afterRoute (sessionId: string): void {
    if (!sessionId.startsWith(CONTEXT_ID_PREFIX)) return;
    const e = this.local(sessionId);
    if (e !== undefined) this.#state?.setSessionTtl?.(sessionId, this.#sessionTtlMs(e));
  }

  /** Before a context session's request is routed: rebinds a session the table lost to the context's engine. */
  beforeRoute (sessionId: string, backends: (id: string) => Backend | null): void {
    if (!sessionId.startsWith(CONTEXT_ID_PREFIX)) return;
    const e = this.local(sessionId);
    if (e !== undefined) this.#state?.holdSession?.(sessionId, backends(e.backendId), this.#sessionTtlMs(e), this.#now());
  }

  /** Where the context's KV is, as the prefix index knows it on `backend` (null: the backend is gone). */
  kvLocation (e: ContextEntry, backend: Backend | null): KvLocation {
    const total = e.blockKeys.length;
    const unknown: KvLocation = { tier: 'unknown', blocks_gpu: 0, blocks_offloaded: 0, blocks_total: total };
    if (backend === null || total === 0) return unknown;
    const m = this.#state?.prefixOf?.(e.blockKeys, backend) ?? null;
    if (m === null) return unknown;
    const gpu = m.gpu;
    const offloaded = Math.max(0, m.engine - m.gpu);
    // Precise mode: the engine's events say where its blocks are. Approximate mode: only EAR's own routing.
    const precise = backend.config.kvEvents !== null;
    let tier: KvTier;
    if (precise && m.engine > 0) tier = offloaded > 0 ? 'cpu' : 'gpu';
    else if (m.assumed > 0) tier = 'assumed'; // precise: the events have not arrived yet
    else tier = precise ? 'evicted' : 'unknown';
    return { tier, blocks_gpu: gpu, blocks_offloaded: offloaded, blocks_total: total };
  }

  async close (): Promise<void> {
    if (this.#timer !== null) clearInterval(this.#timer);
    if (this.#ownStore) await this.store.close();
  }

  #end (e: ContextEntry, expired: boolean): void {
    this.#live.delete(e.id);
    if (expired) this.expired.inc();
    else this.deleted.inc();
    // The session ends as idle sessions do (see the header): back to the gateway's idle TTL.
    this.#state?.setSessionTtl?.(e.id, this.#idleMs);
    if (expired) void this.store.deleteContext(e.id).catch(() => {});
    if (this.#heap.length > 2 * this.#live.size + 1024) this.#rebuild();
  }

  #rebuild (): void {
    this.#heap = [];
    for (const e of this.#live.values()) this.#push([e.expiresAt, e.id]);
  }

  #push (x: [number, string]): void {
    const h = this.#heap;
    h.push(x);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (h[p][0] <= h[i][0]) break;
      [h[p], h[i]] = [h[i], h[p]];
      i = p;
    }
  }

  #pop (): [number, string] {
    const h = this.#heap;
    const top = h[0];
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && h[l][0] < h[m][0]) m = l;
        if (r < h.length && h[r][0] < h[m][0]) m = r;
        if (m === i) break;
        [h[m], h[i]] = [h[i], h[m]];
        i = m;
      }
    }
    return top;
  }
}
