// The SessionStore (docs/architecture.md#sessions-across-replicas): the session state that replicas of
// `ear serve` share — a session's host, its attained service and critical path, its context length — and the
// explicit contexts with their TTL and location. Two implementations: `memory` (memory-store.ts, in-process,
// the default) and `redis` (redis-store.ts, shared by every replica that names the same server).
//
// The store is a hint like every other table. The routing host routes synchronously from its local WASM
// session table; the store's part of a request is around that:
//   before routing  load(sessionId)            → copy the shared record into the local table
//   after deciding  bind(sessionId, backendId) → first writer wins; follow the binding it returns
//   on completion   addService(sessionId, …)   → atomic increment; copy the totals back
//   migration       casHost(sessionId, from, to, now) → exactly one replica moves a session
// Every method answers within a bounded time and never rejects because of the store: a store that is down or
// slow answers { ok: false, reason } (degraded), counts it, and the replica goes on from its local table.
// Methods reject only on invalid arguments (a caller's bug: RangeError).
//
// Hosts are named by backend id, never by pod row: replicas lease rows on their own, so the same backend has
// different rows in different replicas.
//
// Wiring it in (done in src/store/shared-sessions.ts, with RoutingHost.adoptShared; `ear serve --session-store`):
// - Start: parseSessionStoreSpec(flag) → createSessionStore(spec, { sessionTtlMs: sessionIdleMs, maxSessions,
//   logger }); optionally await whenUp(ms) before listening (false is fine: it runs degraded); stats() to
//   /metrics; close() on shutdown.
// - load: a host that is not one of this replica's ready backends counts as unbound; copy attained, critical
//   path and last migration as max(local, shared) (a Redis that lost its data must not lower a priority).
// - bind when the shared record has no host (pass the local figures as the seed); a lost bind names the host
//   to follow. A retry elsewhere, or a host that left, is casHost(id, old, new, now, { migration: false }).
// - addService needs no await on the response path; casHost gates a migration (only the winner moves).
// - Degraded replies: go on from the local table. Nothing to retry: the store replays what it could not send.
import { createHash } from 'node:crypto';
import { EarError } from '../errors/errors.js';

/** Longest id used as is in a key; longer session or context ids are keyed by their SHA-256 (see storeKeyPart). */
export const MAX_ID_BYTES = 256;
/** Longest backend id (the gateway's backend ids are at most 63 characters). */
export const MAX_BACKEND_ID_BYTES = 256;
/** Largest explicit context record, serialized. */
export const MAX_CONTEXT_BYTES = 4096;
/** Longest context TTL: 30 days. */
export const MAX_CONTEXT_TTL_SECONDS = 30 * 86_400;

/** A session as the store holds it. Times in ms on the callers' clocks. */
export interface SharedSession {
  /** Backend id of the session's host; null while unbound. */
  host: string | null;
  /** Attained service: the sum of the service times of its completed calls (PLAS). */
  attainedMs: number;
  /** Critical path (ATLAS): the largest value any call reported. */
  criticalPathMs: number;
  /** Context length after its latest completed call (prompt + completion tokens). */
  contextTokens: number;
  /** When it last migrated; −Infinity if it never did (as in the local SessionRecord). */
  lastMigration: number;
  migrations: number;
  /** Grows by one with every write to the session (bind, addService, a host change). */
  version: number;
}

/** Why a call was not answered by the store: known down (failed fast, nothing sent), no reply in time, or an error. */
export type DegradedReason = 'down' | 'timeout' | 'error';
export interface Degraded { readonly ok: false; readonly reason: DegradedReason }
/** A stored response: the backend that produced it, and the client that did (response-origin.ts). */
export interface ResponseOrigin {
  readonly backendId: string;
  /** The API key's user id (`key:<digest>`), or ANONYMOUS_OWNER when no keys are configured. */
  readonly owner: string;
}

export type StoreReply<T> = { readonly ok: true; readonly value: T } | Degraded;

export interface BindResult {
  /** This call made the binding (the session was new or unbound). */
  won: boolean;
  /** The session after the call: `session.host` is the binding to follow, this caller's or the first writer's. */
  session: SharedSession;
}

export interface CasResult {
  /** The host was `expected` and is now `next`. */
  won: boolean;
  /** The session after the call (null if it does not exist, e.g. an unbind of an absent session). */
  session: SharedSession | null;
}

/** A completed call of the session. */
export interface ServiceUpdate {
  /** Its service time (dispatch to end), added to attained service. */
  serviceMs: number;
  /** Its critical path, if the scheduler computes one: the session keeps the largest. */
  criticalPathMs?: number | null;
  /** The session's context length now (prompt + completion), if the engine reported usage: replaces the old. */
  contextTokens?: number | null;
}

/** What bind writes when it creates the session (the local table's figures, so a store that lost it catches up). */
export interface SessionSeed {
  attainedMs?: number;
  criticalPathMs?: number;
  contextTokens?: number;
}

export interface CasOptions {
  /** Count the change as a migration (lastMigration = now, migrations + 1). Default: both hosts set and different. */
  migration?: boolean;
}

/** An explicit context: KV a client keeps on purpose, where it lives, and whose it is. */
export interface ContextRecord {
  /** Backend id that holds its KV; null until placed. */
  backendId: string | null;
  /** The session it belongs to, if any. */
  sessionId: string | null;
  model: string;
  tokens: number;
  /** Caller's clock, ms. */
  createdAt: number;
}

export interface StoredContext {
  record: ContextRecord;
  /** Time left before it ends on its own (ms). */
  ttlMs: number;
}

/** `connecting`: never reached yet (redis only). Calls made while not `up` are answered degraded at once. */
export type StoreState = 'connecting' | 'up' | 'down';

export interface SessionStoreStats {
  kind: 'memory' | 'redis';
  state: StoreState;
  /** Calls made (replays of the backlog not included). */
  calls: number;
  /** Calls answered degraded: fastFails + timeouts + errors. */
  degraded: number;
  /** Failed at once because the store was known down (nothing sent). */
  fastFails: number;
  /** No reply within the command timeout. */
  timeouts: number;
  /** Any other failure (connection lost mid-call, a server error, a reply that did not parse). */
  errors: number;
  /** up ↔ down changes (each logged once). */
  stateChanges: number;
  /** Sessions whose degraded writes wait to be replayed; what the backlog's bound dropped; what it replayed. */
  backlog: number;
  backlogDropped: number;
  replayed: number;
  /** Entries held (memory: sessions and contexts in process; redis: 0, Redis holds them). */
  sessions: number;
  contexts: number;
  /** Response origins held (memory; redis: 0, its keys expire on their own). */
  responses: number;
  /** What the memory store's bounds removed: past TTL, and the oldest at capacity. */
  expired: number;
  evicted: number;
}

export interface SessionStore {
  readonly kind: 'memory' | 'redis';
  /** Whether other processes see what this one writes (redis: yes; memory: no). */
  readonly shared: boolean;
  readonly state: StoreState;
  /** The shared record of a session, or null if the store has none. Read only: it does not refresh the TTL. */
  load (sessionId: string): Promise<StoreReply<SharedSession | null>>;
  /**
   * Binds the session to `backendId` unless it is bound already (SET NX semantics): the first writer wins and
   * every later caller gets the winner's binding back. Refreshes the session's TTL. `seed` initialises the
   * service figures if this call creates the session.
   */
  bind (sessionId: string, backendId: string, seed?: SessionSeed): Promise<StoreReply<BindResult>>;
  /** A completed call: attained += serviceMs, critical path = max, context tokens replaced, atomically. Refreshes the TTL. */
  addService (sessionId: string, update: ServiceUpdate): Promise<StoreReply<SharedSession>>;
  /**
   * Compare-and-set of the host (null = unbound on either side): won iff the host was `expected`; then it is
   * `next`, and a migration (see CasOptions) records `now`. Atomic across replicas: of concurrent callers with
   * the same `expected`, exactly one wins. Refreshes the TTL of an existing session.
   */
  casHost (sessionId: string, expected: string | null, next: string | null, now: number, opts?: CasOptions): Promise<StoreReply<CasResult>>;
  /** Creates a context that ends on its own after ttlSeconds; false if the id is taken (the old one stays). */
  createContext (id: string, record: ContextRecord, ttlSeconds: number): Promise<StoreReply<boolean>>;
  getContext (id: string): Promise<StoreReply<StoredContext | null>>;
  /** False if there was none. */
  deleteContext (id: string): Promise<StoreReply<boolean>>;
  /**
   * Records which backend produced a stored response (Responses API): previous_response_id must reach it, since
   * engines keep stored responses in their own memory; and whose it is (only its owner may continue it). Kept
   * ttlSeconds; a later write replaces it.
   */
  setResponseOrigin (responseId: string, origin: ResponseOrigin, ttlSeconds: number): Promise<StoreReply<boolean>>;
  /** Where and whose `responseId` is, or null if none is recorded (never, or past its TTL). */
  getResponseOrigin (responseId: string): Promise<StoreReply<ResponseOrigin | null>>;
  stats (): SessionStoreStats;
  /** Resolves true once the store is up, false after timeoutMs (memory: true at once). Never rejects. */
  whenUp (timeoutMs: number): Promise<boolean>;
  close (): Promise<void>;
}

/** A pino-like logger: (fields, message). */
export interface StoreLogger {
  warn (obj: object, msg: string): void;
  info (obj: object, msg: string): void;
}

// ---- configuration -------------------------------------------------------------------------------------------

/** Same code and message shape as the gateway's ConfigError (src/config/config-error.ts), without importing it. */
export class StoreConfigError extends EarError {
  constructor (path: string, rule: string) {
    super('EAR_ERR_CONFIG', `config ${path}: ${rule}`);
    this.name = 'StoreConfigError';
  }
}

export type SessionStoreSpec =
  | { kind: 'memory' }
  | { kind: 'redis'; host: string; port: number; db: number };

const REDIS_FORM = 'redis://HOST:PORT[/DB]';

/**
 * `memory`, or `redis://HOST[:PORT][/DB]` (port 6379, db 0 by default). Nothing else: no credentials, query or
 * TLS, so the only server ever contacted is the one named here (no Sentinel or Cluster discovery either).
 */
export function parseSessionStoreSpec (v: unknown, path = '--session-store'): SessionStoreSpec {
  if (typeof v !== 'string' || v.trim() === '') throw new StoreConfigError(path, `must be "memory" or ${REDIS_FORM}`);
  const s = v.trim();
  if (s === 'memory') return { kind: 'memory' };
  if (!s.toLowerCase().startsWith('redis://')) throw new StoreConfigError(path, `"${s}" must be "memory" or ${REDIS_FORM}`);
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    throw new StoreConfigError(path, `"${s}" is not a URL of the form ${REDIS_FORM}`);
  }
  if (u.username !== '' || u.password !== '') throw new StoreConfigError(path, `"${s}": credentials in the URL are not supported (form ${REDIS_FORM})`);
  if (u.search !== '' || u.hash !== '') throw new StoreConfigError(path, `"${s}": no query or fragment allowed (form ${REDIS_FORM})`);
  const host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
  if (host === '') throw new StoreConfigError(path, `"${s}" names no host (form ${REDIS_FORM})`);
  const port = u.port === '' ? 6379 : Number(u.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new StoreConfigError(path, `"${s}": port must be in [1, 65535]`);
  let db = 0;
  if (u.pathname !== '' && u.pathname !== '/') {
    const d = u.pathname.slice(1);
    if (!/^\d{1,5}$/.test(d) || Number(d) > 65535) throw new StoreConfigError(path, `"${s}": database must be an integer in [0, 65535], got "${d}"`);
    db = Number(d);
  }
  return { kind: 'redis', host, port, db };
}

// ---- validation and keys, shared by both implementations -----------------------------------------------------

const utf8Bytes = (s: string): number => Buffer.byteLength(s, 'utf8');

/**
 * The part of a key that names a session or context: `:<id>` for ids up to MAX_ID_BYTES (the gateway clips
 * session ids to 256 characters, which may be more bytes), `#<sha256 hex>` beyond. The two forms cannot collide.
 */
export function storeKeyPart (id: string, what: string): string {
  if (typeof id !== 'string' || id === '') throw new RangeError(`${what} must be a non-empty string`);
  if (id.length <= MAX_ID_BYTES / 3 || utf8Bytes(id) <= MAX_ID_BYTES) return `:${id}`;
  return `#${createHash('sha256').update(id, 'utf8').digest('hex')}`;
}

export function checkBackendId (id: unknown, what = 'backend id'): string {
  if (typeof id !== 'string' || id === '' || utf8Bytes(id) > MAX_BACKEND_ID_BYTES) {
    throw new RangeError(`${what} must be a non-empty string of at most ${MAX_BACKEND_ID_BYTES} bytes, got ${JSON.stringify(id)}`);
  }
  return id;
}

export function checkHostOrNull (id: unknown, what: string): string | null {
  return id === null ? null : checkBackendId(id, what);
}

function checkNonNegative (v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw new RangeError(`${what} must be a finite number ≥ 0, got ${String(v)}`);
  return v;
}

function checkTokens (v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 0x7FFFFFFF) throw new RangeError(`${what} must be an integer in [0, 2^31), got ${String(v)}`);
  return v;
}

export function checkServiceUpdate (u: ServiceUpdate): { serviceMs: number; criticalPathMs: number | null; contextTokens: number | null } {
  if (typeof u !== 'object' || u === null) throw new RangeError('service update must be an object');
  return {
    serviceMs: checkNonNegative(u.serviceMs, 'serviceMs'),
    criticalPathMs: u.criticalPathMs == null ? null : checkNonNegative(u.criticalPathMs, 'criticalPathMs'),
    contextTokens: u.contextTokens == null ? null : checkTokens(u.contextTokens, 'contextTokens')
  };
}

export function checkSeed (s: SessionSeed | undefined): { attainedMs: number; criticalPathMs: number; contextTokens: number } {
  return {
    attainedMs: s?.attainedMs == null ? 0 : checkNonNegative(s.attainedMs, 'seed.attainedMs'),
    criticalPathMs: s?.criticalPathMs == null ? 0 : checkNonNegative(s.criticalPathMs, 'seed.criticalPathMs'),
    contextTokens: s?.contextTokens == null ? 0 : checkTokens(s.contextTokens, 'seed.contextTokens')
  };
}

export function checkNow (now: unknown): number {
  if (typeof now !== 'number' || !Number.isFinite(now)) throw new RangeError(`now must be a finite number, got ${String(now)}`);
  return now;
}

export function checkTtlSeconds (ttl: unknown): number {
  if (typeof ttl !== 'number' || !Number.isInteger(ttl) || ttl < 1 || ttl > MAX_CONTEXT_TTL_SECONDS) {
    throw new RangeError(`context TTL must be an integer number of seconds in [1, ${MAX_CONTEXT_TTL_SECONDS}], got ${String(ttl)}`);
  }
  return ttl;
}

/** The record as stored (JSON, at most MAX_CONTEXT_BYTES), after checking every field. */
export function encodeContext (r: ContextRecord): string {
  if (typeof r !== 'object' || r === null) throw new RangeError('context record must be an object');
  const rec: ContextRecord = {
    backendId: checkHostOrNull(r.backendId, 'context backendId'),
    sessionId: r.sessionId === null ? null : typeof r.sessionId === 'string' && utf8Bytes(r.sessionId) <= 1024 ? r.sessionId : badField('sessionId', 'a string of at most 1024 bytes or null'),
    model: typeof r.model === 'string' && utf8Bytes(r.model) <= 1024 ? r.model : badField('model', 'a string of at most 1024 bytes'),
    tokens: checkTokens(r.tokens, 'context tokens'),
    createdAt: checkNow(r.createdAt)
  };
  const json = JSON.stringify(rec);
  if (utf8Bytes(json) > MAX_CONTEXT_BYTES) throw new RangeError(`context record is over ${MAX_CONTEXT_BYTES} bytes`);
  return json;
}

function badField (name: string, rule: string): never {
  throw new RangeError(`context ${name} must be ${rule}`);
}

/** A stored context back; null if it is not one of ours (the caller counts that as an error). */
export function decodeContext (json: string): ContextRecord | null {
  try {
    const v = JSON.parse(json) as ContextRecord;
    encodeContext(v);
    return { backendId: v.backendId, sessionId: v.sessionId, model: v.model, tokens: v.tokens, createdAt: v.createdAt };
  } catch {
    return null;
  }
}

/** A response origin after checking its fields (the store keeps ids and owners bounded like backend ids). */
export function checkResponseOrigin (o: ResponseOrigin): ResponseOrigin {
  if (typeof o !== 'object' || o === null) throw new RangeError('response origin must be an object');
  return { backendId: checkBackendId(o.backendId), owner: checkBackendId(o.owner, 'response owner') };
}

/** The origin as stored (JSON). */
export function encodeResponseOrigin (o: ResponseOrigin): string {
  return JSON.stringify(checkResponseOrigin(o));
}

/** A stored origin back; null if it is not one of ours (a record of a version that kept no owner reads as none). */
export function decodeResponseOrigin (json: string): ResponseOrigin | null {
  try {
    return checkResponseOrigin(JSON.parse(json) as ResponseOrigin);
  } catch {
    return null;
  }
}

export function emptySession (): SharedSession {
  return { host: null, attainedMs: 0, criticalPathMs: 0, contextTokens: 0, lastMigration: -Infinity, migrations: 0, version: 0 };
}

/** The default of CasOptions.migration. */
export function isMigration (expected: string | null, next: string | null, opts: CasOptions | undefined): boolean {
  return opts?.migration ?? (expected !== null && next !== null && expected !== next);
}

export const DEGRADED: Readonly<Record<DegradedReason, Degraded>> = Object.freeze({
  down: Object.freeze({ ok: false, reason: 'down' }),
  timeout: Object.freeze({ ok: false, reason: 'timeout' }),
  error: Object.freeze({ ok: false, reason: 'error' })
});

export function ok<T> (value: T): StoreReply<T> {
  return { ok: true, value };
}
