// The `memory` SessionStore (the default): the store's contract kept in this process, answered at once.
//
// Why its own bounded Maps rather than a wrapper over the WASM session table (src/core/session-table.ts):
// - The table names hosts by pod row and is written by the Router during route() and finished(); a wrapper's
//   bind and addService would either write a second time what the Router already wrote (attained service
//   counted twice) or do nothing, and the integrator would need one code path per store. With a store of its
//   own, the request path is the same for `memory` and `redis`: load → copy in, bind → follow, addService →
//   copy the totals back; with `memory` every copy finds what the table already holds.
// - The table has no place for explicit contexts, versions or backend ids.
// - It is the executable statement of the contract: test/store runs one suite against both implementations.
// The cost is a second copy of the sessions' few fields (host id, four numbers), bounded like the table.
//
// Bounds: at most maxSessions sessions, maxContexts contexts and maxResponses response origins. Each Map is in order of last write (a write
// moves the entry to the end), so the oldest write goes first at capacity (counted as evicted) and a short
// sweep from the front removes those past their TTL (counted as expired); a read of an expired entry removes it.
// Time for TTLs comes from `clock` (Date.now by default; the lab passes its virtual clock).
import { MAX_SESSIONS, SESSION_IDLE_MS } from '../core/defaults.js';
import {
  checkBackendId, checkHostOrNull, checkNow, checkResponseOrigin, checkSeed, checkServiceUpdate, checkTtlSeconds,
  decodeContext, emptySession, encodeContext, isMigration, ok, storeKeyPart,
  type BindResult, type CasOptions, type ResponseOrigin, type CasResult, type ContextRecord, type ServiceUpdate, type SessionSeed, type SessionStore,
  type SessionStoreStats, type SharedSession, type StoreReply, type StoredContext
} from './session-store.js';

export interface MemoryStoreOptions {
  /** Default MAX_SESSIONS (the gateway's maxSessions). */
  maxSessions?: number;
  /** Default 65536. */
  maxContexts?: number;
  /** Response origins kept (Responses API previous_response_id); default 65536. */
  maxResponses?: number;
  /** Idle time after which a session ends (ms); default SESSION_IDLE_MS (the gateway's sessionIdleMs). */
  sessionTtlMs?: number;
  clock?: () => number;
}

interface Entry<T> { value: T; expiresAt: number }

/** Entries looked at from the front of a Map per write, for expiry. */
const SWEEP = 8;

export class MemoryStore implements SessionStore {
  readonly kind = 'memory' as const;
  readonly shared = false;
  readonly state = 'up' as const;
  readonly #sessions = new Map<string, Entry<SharedSession>>();
  readonly #contexts = new Map<string, Entry<string>>();
  readonly #responses = new Map<string, Entry<ResponseOrigin>>();
  readonly #maxSessions: number;
  readonly #maxContexts: number;
  readonly #maxResponses: number;
  readonly #ttlMs: number;
  readonly #clock: () => number;
  #calls = 0;
  #expired = 0;
  #evicted = 0;

  constructor (opts: MemoryStoreOptions = {}) {
    this.#maxSessions = positiveInt(opts.maxSessions ?? MAX_SESSIONS, 'maxSessions');
    this.#maxContexts = positiveInt(opts.maxContexts ?? 65536, 'maxContexts');
    this.#maxResponses = positiveInt(opts.maxResponses ?? 65536, 'maxResponses');
    this.#ttlMs = positiveInt(opts.sessionTtlMs ?? SESSION_IDLE_MS, 'sessionTtlMs');
    this.#clock = opts.clock ?? Date.now;
  }

  async load (sessionId: string): Promise<StoreReply<SharedSession | null>> {
    this.#calls++;
    const s = this.#live(this.#sessions, storeKeyPart(sessionId, 'session id'));
    return ok(s === undefined ? null : { ...s.value });
  }

  async bind (sessionId: string, backendId: string, seed?: SessionSeed): Promise<StoreReply<BindResult>> {
    const k = storeKeyPart(sessionId, 'session id');
    checkBackendId(backendId);
    const sd = checkSeed(seed);
    this.#calls++;
    let s = this.#live(this.#sessions, k)?.value;
    if (s === undefined) s = { ...emptySession(), attainedMs: sd.attainedMs, criticalPathMs: sd.criticalPathMs, contextTokens: sd.contextTokens };
    let won = false;
    if (s.host === null) {
      s.host = backendId;
      s.version++;
      won = true;
    }
    this.#touchSession(k, s);
    return ok({ won, session: { ...s } });
  }

  async addService (sessionId: string, update: ServiceUpdate): Promise<StoreReply<SharedSession>> {
    const k = storeKeyPart(sessionId, 'session id');
    const u = checkServiceUpdate(update);
    this.#calls++;
    const s = this.#live(this.#sessions, k)?.value ?? emptySession();
    s.attainedMs += u.serviceMs;
    if (u.criticalPathMs !== null && u.criticalPathMs > s.criticalPathMs) s.criticalPathMs = u.criticalPathMs;
    if (u.contextTokens !== null) s.contextTokens = u.contextTokens;
    s.version++;
    this.#touchSession(k, s);
    return ok({ ...s });
  }

  async casHost (sessionId: string, expected: string | null, next: string | null, now: number, opts?: CasOptions): Promise<StoreReply<CasResult>> {
    const k = storeKeyPart(sessionId, 'session id');
    checkHostOrNull(expected, 'expected host');
    checkHostOrNull(next, 'next host');
    checkNow(now);
    this.#calls++;
    const e = this.#live(this.#sessions, k);
    const host = e?.value.host ?? null;
    if (host !== expected) {
      if (e !== undefined) this.#touchSession(k, e.value);
      return ok({ won: false, session: e === undefined ? null : { ...e.value } });
    }
    if (e === undefined && next === null) return ok({ won: true, session: null });
    const s = e?.value ?? emptySession();
    if (next !== host) {
      s.host = next;
      if (isMigration(expected, next, opts)) {
        s.lastMigration = now;
        s.migrations++;
      }
      s.version++;
    }
    this.#touchSession(k, s);
    return ok({ won: true, session: { ...s } });
  }

  async createContext (id: string, record: ContextRecord, ttlSeconds: number): Promise<StoreReply<boolean>> {
    const k = storeKeyPart(id, 'context id');
    const json = encodeContext(record);
    checkTtlSeconds(ttlSeconds);
    this.#calls++;
    if (this.#live(this.#contexts, k) !== undefined) return ok(false);
    this.#put(this.#contexts, k, json, this.#clock() + ttlSeconds * 1000, this.#maxContexts);
    return ok(true);
  }

  async getContext (id: string): Promise<StoreReply<StoredContext | null>> {
    const k = storeKeyPart(id, 'context id');
    this.#calls++;
    const e = this.#live(this.#contexts, k);
    if (e === undefined) return ok(null);
    const record = decodeContext(e.value);
    return ok(record === null ? null : { record, ttlMs: Math.max(0, e.expiresAt - this.#clock()) });
  }

  async deleteContext (id: string): Promise<StoreReply<boolean>> {
    const k = storeKeyPart(id, 'context id');
    this.#calls++;
    const had = this.#live(this.#contexts, k) !== undefined;
    this.#contexts.delete(k);
    return ok(had);
  }

  async setResponseOrigin (responseId: string, origin: ResponseOrigin, ttlSeconds: number): Promise<StoreReply<boolean>> {
    const k = storeKeyPart(responseId, 'response id');
    const o = checkResponseOrigin(origin);
    checkTtlSeconds(ttlSeconds);
    this.#calls++;
    this.#put(this.#responses, k, o, this.#clock() + ttlSeconds * 1000, this.#maxResponses);
    return ok(true);
  }

  async getResponseOrigin (responseId: string): Promise<StoreReply<ResponseOrigin | null>> {
    const k = storeKeyPart(responseId, 'response id');
    this.#calls++;
    return ok(this.#live(this.#responses, k)?.value ?? null);
  }

  stats (): SessionStoreStats {
    return {
      kind: 'memory', state: 'up', calls: this.#calls, degraded: 0, fastFails: 0, timeouts: 0, errors: 0, stateChanges: 0,
      backlog: 0, backlogDropped: 0, replayed: 0,
      sessions: this.#sessions.size, contexts: this.#contexts.size, responses: this.#responses.size, expired: this.#expired, evicted: this.#evicted
    };
  }

  async whenUp (_timeoutMs: number): Promise<boolean> {
    return true;
  }

  async close (): Promise<void> {
    this.#sessions.clear();
    this.#contexts.clear();
    this.#responses.clear();
  }

  /** The entry if present and not past its TTL (an expired one is removed). */
  #live<T> (m: Map<string, Entry<T>>, k: string): Entry<T> | undefined {
    const e = m.get(k);
    if (e === undefined) return undefined;
    if (e.expiresAt <= this.#clock()) {
      m.delete(k);
      this.#expired++;
      return undefined;
    }
    return e;
  }

  #touchSession (k: string, s: SharedSession): void {
    this.#put(this.#sessions, k, s, this.#clock() + this.#ttlMs, this.#maxSessions);
  }

  /** Writes the entry at the end of the Map (newest), after expiring from the front and evicting at capacity. */
  #put<T> (m: Map<string, Entry<T>>, k: string, value: T, expiresAt: number, max: number): void {
    m.delete(k);
    const now = this.#clock();
    let n = 0;
    for (const [key, e] of m) {
      if (n++ >= SWEEP) break;
      if (e.expiresAt <= now) {
        m.delete(key);
        this.#expired++;
      }
    }
    while (m.size >= max) {
      m.delete(m.keys().next().value as string);
      this.#evicted++;
    }
    m.set(k, { value, expiresAt });
  }
}

function positiveInt (v: number, what: string): number {
  if (!Number.isInteger(v) || v < 1) throw new RangeError(`memory store ${what} must be a positive integer, got ${v}`);
  return v;
}
