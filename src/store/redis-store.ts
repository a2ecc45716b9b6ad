// The `redis` SessionStore (`ear serve --session-store redis://HOST:PORT[/DB]`): session state shared by every
// replica that names the same server, through ioredis.
//
// Key schema (prefix configurable, default `ear:`; see storeKeyPart for ids over 256 bytes):
//   <prefix>s:<sessionId>    hash, one per session, PEXPIRE sessionTtlMs (30 min) refreshed by every write:
//                              h   host: backend id (never a pod row; absent while unbound)
//                              a   attained service, ms (HINCRBYFLOAT)
//                              cp  critical path, ms (the largest reported)
//                              ct  context tokens after the latest completed call
//                              lm  last migration, ms on the migrating replica's clock (absent: never)
//                              m   migrations
//                              v   version: +1 on every write
//   <prefix>s#<sha256 hex>   the same, for a session id over 256 bytes
//   <prefix>ctx:<id>         string: an explicit context's JSON (≤ 4 KiB), SET NX EX ttl: it ends on its own
//   <prefix>ctx#<sha256 hex> the same, for a context id over 256 bytes
// Writes to a session are Lua scripts on its one key (lua.ts): bind (first writer wins), addService (atomic
// increment and max), casHost (compare-and-set of h). Reads are HGETALL, and GET + PTTL in a script.
//
// Degraded mode. Redis is a hint: a replica whose Redis is down or slow runs on its local session table.
// - Every command has a bounded time (commandTimeoutMs, 50 ms): the client's own timer rejects it. There is no
//   offline queue: a command made while disconnected fails at once instead of waiting for a reconnect.
// - The store is `up` or `down`. It goes down when the connection closes or after failuresToDown consecutive
//   timeouts or errors (a slow Redis); while down every call is answered degraded at once, without a command.
//   It comes back up when the client reconnects ('ready'), or, when the connection never dropped, when a PING
//   sent every probeIntervalMs answers. Each change is logged once (warn when down, info when up) and counted.
// - Nothing here rejects because of Redis: a failed call resolves { ok: false, reason }, and is counted
//   (fastFails, timeouts, errors).
// - Catching up: writes answered `down` were never sent, so they are kept in a backlog bounded to maxBacklog
//   sessions (the oldest dropped first, counted): per session the sum of its service, the largest critical
//   path, the latest context length, and its host change (first expected → latest next). When the store is
//   up again they are replayed, host change by casHost (lost if another replica moved the session meanwhile),
//   service by addService. Writes that timed out or failed mid-call are not replayed, since Redis may have
//   applied them: an increment is applied at most once.
import { Redis } from 'ioredis';
import { ADD_SERVICE_LUA, BIND_LUA, CAS_HOST_LUA, GET_CONTEXT_LUA } from './lua.js';
import { SESSION_IDLE_MS } from '../core/defaults.js';
import {
  DEGRADED, checkBackendId, checkHostOrNull, checkNow, checkSeed, checkServiceUpdate, checkTtlSeconds,
  decodeContext, decodeResponseOrigin, encodeContext, encodeResponseOrigin, isMigration, ok, storeKeyPart,
  type BindResult, type CasOptions, type CasResult, type ContextRecord, type ResponseOrigin, type DegradedReason, type ServiceUpdate, type SessionSeed,
  type SessionStore, type SessionStoreStats, type SharedSession, type StoreLogger, type StoreReply, type StoreState, type StoredContext
} from './session-store.js';

export interface RedisStoreOptions {
  host: string;
  port: number;
  db?: number;
  /** Key prefix, default 'ear:'. */
  prefix?: string;
  /** Idle time after which a session's hash expires (ms); default SESSION_IDLE_MS (the gateway's sessionIdleMs). */
  sessionTtlMs?: number;
  /** Longest wait for any reply (ms); default 50. */
  commandTimeoutMs?: number;
  /** Longest wait for a TCP connection (ms); default 1000. */
  connectTimeoutMs?: number;
  /** Consecutive timeouts or errors that mark the store down; default 3. */
  failuresToDown?: number;
  /** While down on a live connection, a PING this often checks whether it answers again (ms); default 1000. */
  probeIntervalMs?: number;
  /** Longest pause between reconnection attempts (ms); default 1000. */
  reconnectMaxMs?: number;
  /** Sessions whose degraded writes are kept for replay; default 1024 (0: none). */
  maxBacklog?: number;
  logger?: StoreLogger;
}

interface HostChange { expected: string | null; next: string | null; now: number; migration: boolean }
interface BacklogEntry { serviceMs: number; criticalPathMs: number | null; contextTokens: number | null; host: HostChange | null }

type ScriptReply = [number, string[]];
interface Scripted {
  earBind (key: string, ...args: string[]): Promise<ScriptReply>;
  earAddService (key: string, ...args: string[]): Promise<ScriptReply>;
  earCasHost (key: string, ...args: string[]): Promise<ScriptReply>;
  earGetContext (key: string): Promise<[string | null, number]>;
}

const NULL_LOGGER: StoreLogger = { warn () {}, info () {} };

export class RedisStore implements SessionStore {
  readonly kind = 'redis' as const;
  readonly shared = true;
  readonly #client: Redis;
  readonly #scripts: Scripted;
  readonly #prefix: string;
  readonly #ttlMs: string;
  readonly #failuresToDown: number;
  readonly #probeIntervalMs: number;
  readonly #maxBacklog: number;
  readonly #log: StoreLogger;
  readonly #server: string;
  readonly #backlog = new Map<string, BacklogEntry>();
  readonly #waiters = new Set<() => void>();
  #state: StoreState = 'connecting';
  #downSince = 0;
  #failures = 0;
  #probe: NodeJS.Timeout | null = null;
  #probing = false;
  #replaying = false;
  #closed = false;
  readonly #n = { calls: 0, degraded: 0, fastFails: 0, timeouts: 0, errors: 0, stateChanges: 0, backlogDropped: 0, replayed: 0 };

  constructor (opts: RedisStoreOptions) {
    const prefix = opts.prefix ?? 'ear:';
    if (typeof prefix !== 'string' || Buffer.byteLength(prefix) > 64) throw new RangeError('redis store prefix must be a string of at most 64 bytes');
    this.#prefix = prefix;
    this.#ttlMs = String(int(opts.sessionTtlMs ?? SESSION_IDLE_MS, 'sessionTtlMs', 1000));
    const commandTimeout = int(opts.commandTimeoutMs ?? 50, 'commandTimeoutMs', 1);
    this.#failuresToDown = int(opts.failuresToDown ?? 3, 'failuresToDown', 1);
    this.#probeIntervalMs = int(opts.probeIntervalMs ?? 1000, 'probeIntervalMs', 10);
    this.#maxBacklog = int(opts.maxBacklog ?? 1024, 'maxBacklog', 0);
    const reconnectMaxMs = int(opts.reconnectMaxMs ?? 1000, 'reconnectMaxMs', 10);
    this.#log = opts.logger ?? NULL_LOGGER;
    this.#server = `${opts.host}:${opts.port}${opts.db ? `/${opts.db}` : ''}`;
    this.#client = new Redis({
      host: opts.host,
      port: opts.port,
      db: opts.db ?? 0,
      lazyConnect: true,
      connectTimeout: int(opts.connectTimeoutMs ?? 1000, 'connectTimeoutMs', 1),
      commandTimeout,
      // Fail fast instead of queueing while disconnected, and never send a command twice.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      autoResubscribe: false,
      // CLIENT SETINFO is unknown before Redis 7.2; nothing here needs it.
      disableClientInfo: true,
      retryStrategy: (times) => Math.min(50 * times, reconnectMaxMs)
    });
    this.#client.defineCommand('earBind', { numberOfKeys: 1, lua: BIND_LUA });
    this.#client.defineCommand('earAddService', { numberOfKeys: 1, lua: ADD_SERVICE_LUA });
    this.#client.defineCommand('earCasHost', { numberOfKeys: 1, lua: CAS_HOST_LUA });
    this.#client.defineCommand('earGetContext', { numberOfKeys: 1, lua: GET_CONTEXT_LUA });
    this.#scripts = this.#client as unknown as Scripted;
    this.#client.on('ready', () => {
      this.#failures = 0;
      this.#setState('up', {});
    });
    this.#client.on('close', () => { if (!this.#closed) this.#setState('down', { reason: 'connection closed' }); });
    // Connection errors come again on every reconnection attempt: they change the state once, never log each.
    this.#client.on('error', (err: Error) => { if (this.#state === 'connecting') this.#setState('down', { reason: err.message }); });
    this.#client.connect().catch(() => { /* the retry strategy goes on; the state says the rest */ });
  }

  get state (): StoreState {
    return this.#state;
  }

  async load (sessionId: string): Promise<StoreReply<SharedSession | null>> {
    const key = this.#sessionKey(sessionId);
    return this.#run(async () => parseSession(await this.#client.hgetall(key)));
  }

  async bind (sessionId: string, backendId: string, seed?: SessionSeed): Promise<StoreReply<BindResult>> {
    const key = this.#sessionKey(sessionId);
    checkBackendId(backendId);
    const s = checkSeed(seed);
    return this.#run(async () => {
      const [won, flat] = await this.#scripts.earBind(key, backendId, this.#ttlMs, String(s.attainedMs), String(s.criticalPathMs), String(s.contextTokens));
      return { won: won === 1, session: mustSession(flat) };
    }, () => this.#fold(key, { host: { expected: null, next: backendId, now: 0, migration: false } }));
  }

  async addService (sessionId: string, update: ServiceUpdate): Promise<StoreReply<SharedSession>> {
    const key = this.#sessionKey(sessionId);
    const u = checkServiceUpdate(update);
    return this.#run(() => this.#addService(key, u), () => this.#fold(key, u));
  }

  async casHost (sessionId: string, expected: string | null, next: string | null, now: number, opts?: CasOptions): Promise<StoreReply<CasResult>> {
    const key = this.#sessionKey(sessionId);
    const change: HostChange = {
      expected: checkHostOrNull(expected, 'expected host'),
      next: checkHostOrNull(next, 'next host'),
      now: checkNow(now),
      migration: isMigration(expected, next, opts)
    };
    return this.#run(() => this.#casHost(key, change), () => this.#fold(key, { host: change }));
  }

  async createContext (id: string, record: ContextRecord, ttlSeconds: number): Promise<StoreReply<boolean>> {
    const key = this.#contextKey(id);
    const json = encodeContext(record);
    checkTtlSeconds(ttlSeconds);
    return this.#run(async () => (await this.#client.set(key, json, 'EX', ttlSeconds, 'NX')) === 'OK');
  }

  async getContext (id: string): Promise<StoreReply<StoredContext | null>> {
    const key = this.#contextKey(id);
    return this.#run(async () => {
      const [json, pttl] = await this.#scripts.earGetContext(key);
      if (json === null || json === undefined) return null;
      const record = decodeContext(json);
      if (record === null) throw new TypeError(`${key} does not hold a context record`);
      return { record, ttlMs: Math.max(0, Number(pttl)) };
    });
  }

  async deleteContext (id: string): Promise<StoreReply<boolean>> {
    const key = this.#contextKey(id);
    return this.#run(async () => (await this.#client.del(key)) === 1);
  }

  async setResponseOrigin (responseId: string, origin: ResponseOrigin, ttlSeconds: number): Promise<StoreReply<boolean>> {
    const key = `${this.#prefix}resp${storeKeyPart(responseId, 'response id')}`;
    const json = encodeResponseOrigin(origin);
    checkTtlSeconds(ttlSeconds);
    return this.#run(async () => (await this.#client.set(key, json, 'EX', ttlSeconds)) === 'OK');
  }

  async getResponseOrigin (responseId: string): Promise<StoreReply<ResponseOrigin | null>> {
    const key = `${this.#prefix}resp${storeKeyPart(responseId, 'response id')}`;
    return this.#run(async () => {
      const json = await this.#client.get(key);
      return json === null ? null : decodeResponseOrigin(json);
    });
  }

  stats (): SessionStoreStats {
    return {
      kind: 'redis', state: this.#state, ...this.#n, backlog: this.#backlog.size, sessions: 0, contexts: 0, responses: 0, expired: 0, evicted: 0
    };
  }

  whenUp (timeoutMs: number): Promise<boolean> {
    if (this.#state === 'up') return Promise.resolve(true);
    if (this.#closed) return Promise.resolve(false);
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#waiters.delete(done);
        resolve(this.#state === 'up');
      };
      const timer = setTimeout(done, timeoutMs);
      this.#waiters.add(done);
    });
  }

  async close (): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#stopProbe();
    for (const w of [...this.#waiters]) w();
    if (this.#client.status === 'ready') await this.#client.quit().catch(() => {});
    this.#client.disconnect();
  }

  // ---- commands ----

  #sessionKey (sessionId: string): string {
    return `${this.#prefix}s${storeKeyPart(sessionId, 'session id')}`;
  }

  #contextKey (id: string): string {
    return `${this.#prefix}ctx${storeKeyPart(id, 'context id')}`;
  }

  async #addService (key: string, u: { serviceMs: number; criticalPathMs: number | null; contextTokens: number | null }): Promise<SharedSession> {
    const [, flat] = await this.#scripts.earAddService(key, String(u.serviceMs), u.criticalPathMs === null ? '' : String(u.criticalPathMs),
      u.contextTokens === null ? '' : String(u.contextTokens), this.#ttlMs);
    return mustSession(flat);
  }

  async #casHost (key: string, c: HostChange): Promise<CasResult> {
    const [won, flat] = await this.#scripts.earCasHost(key, c.expected ?? '', c.next ?? '', String(c.now), c.migration ? '1' : '0', this.#ttlMs);
    return { won: won === 1, session: parseSession(flat) };
  }

  /**
   * Runs one call within the store's bounds. `onDown` keeps a write that was never sent for replay. Replays
   * pass count = false: they are not callers' calls.
   */
  async #run<T> (fn: () => Promise<T>, onDown?: () => void, count = true): Promise<StoreReply<T>> {
    if (count) this.#n.calls++;
    if (this.#state !== 'up' || this.#client.status !== 'ready') return this.#failed('down', null, onDown, count);
    try {
      const value = await fn();
      this.#failures = 0;
      return ok(value);
    } catch (err) {
      const msg = (err as Error)?.message ?? String(err);
      const reason: DegradedReason = msg === 'Command timed out' ? 'timeout' : msg.includes('enableOfflineQueue') ? 'down' : 'error';
      return this.#failed(reason, msg, onDown, count);
    }
  }

  #failed (reason: DegradedReason, msg: string | null, onDown: (() => void) | undefined, count: boolean): StoreReply<never> {
    if (count) this.#n.degraded++;
    if (reason === 'down') {
      this.#n.fastFails++;
      onDown?.();
    } else {
      if (reason === 'timeout') this.#n.timeouts++;
      else this.#n.errors++;
      if (++this.#failures >= this.#failuresToDown && this.#state === 'up') {
        this.#setState('down', { reason: `${this.#failures} consecutive failures, the last: ${msg}` });
      }
    }
    return DEGRADED[reason];
  }

  // ---- state ----

  #setState (next: StoreState, fields: Record<string, unknown>): void {
    const prev = this.#state;
    if (prev === next || this.#closed) return;
    this.#state = next;
    this.#n.stateChanges++;
    const now = Date.now();
    if (next === 'down') {
      this.#downSince = now;
      this.#log.warn({ store: 'redis', server: this.#server, ...fields }, prev === 'connecting'
        ? 'session store unreachable: running on the local session table'
        : 'session store down: running on the local session table');
      this.#startProbe();
      return;
    }
    this.#stopProbe();
    this.#log.info({ store: 'redis', server: this.#server, ...(prev === 'down' ? { downMs: now - this.#downSince, backlog: this.#backlog.size } : {}) },
      prev === 'connecting' ? 'session store up' : 'session store back up: shared session state resumes');
    for (const w of [...this.#waiters]) w();
    void this.#replay();
  }

  /** While down on a connection that is still open (a slow Redis), a PING now and then: an answer means up. */
  #startProbe (): void {
    if (this.#probe !== null) return;
    this.#probe = setInterval(() => {
      if (this.#probing || this.#client.status !== 'ready') return; // a dropped connection comes back through 'ready'
      this.#probing = true;
      this.#client.ping().then(() => {
        this.#failures = 0;
        this.#setState('up', { probe: true });
      }, () => {}).finally(() => { this.#probing = false; });
    }, this.#probeIntervalMs);
    this.#probe.unref();
  }

  #stopProbe (): void {
    if (this.#probe !== null) clearInterval(this.#probe);
    this.#probe = null;
  }

  // ---- backlog ----

  #fold (key: string, w: { serviceMs?: number; criticalPathMs?: number | null; contextTokens?: number | null; host?: HostChange }): void {
    if (this.#maxBacklog === 0) {
      this.#n.backlogDropped++;
      return;
    }
    let e = this.#backlog.get(key);
    if (e !== undefined) {
      this.#backlog.delete(key); // to the end: the newest
    } else {
      if (this.#backlog.size >= this.#maxBacklog) {
        this.#backlog.delete(this.#backlog.keys().next().value as string);
        this.#n.backlogDropped++;
      }
      e = { serviceMs: 0, criticalPathMs: null, contextTokens: null, host: null };
    }
    e.serviceMs += w.serviceMs ?? 0;
    if (w.criticalPathMs != null && (e.criticalPathMs === null || w.criticalPathMs > e.criticalPathMs)) e.criticalPathMs = w.criticalPathMs;
    if (w.contextTokens != null) e.contextTokens = w.contextTokens;
    if (w.host !== undefined) {
      e.host = e.host === null ? { ...w.host } : { expected: e.host.expected, next: w.host.next, now: w.host.now, migration: e.host.migration || w.host.migration };
    }
    this.#backlog.set(key, e);
  }

  async #replay (): Promise<void> {
    if (this.#replaying) return;
    this.#replaying = true;
    try {
      while (this.#backlog.size > 0 && this.#state === 'up') {
        const key = this.#backlog.keys().next().value as string;
        const e = this.#backlog.get(key) as BacklogEntry;
        this.#backlog.delete(key);
        let lost = false;
        if (e.host !== null) {
          const h = e.host;
          const r = await this.#run(() => this.#casHost(key, h), () => this.#fold(key, { host: h }), false);
          if (!r.ok && r.reason !== 'down') lost = true;
        }
        if (e.serviceMs > 0 || e.criticalPathMs !== null || e.contextTokens !== null) {
          const u = { serviceMs: e.serviceMs, criticalPathMs: e.criticalPathMs, contextTokens: e.contextTokens };
          const r = await this.#run(() => this.#addService(key, u), () => this.#fold(key, u), false);
          if (!r.ok && r.reason !== 'down') lost = true;
        }
        if (lost) this.#n.backlogDropped++;
        else this.#n.replayed++;
      }
    } finally {
      this.#replaying = false;
    }
  }
}

function int (v: number, what: string, min: number): number {
  if (!Number.isInteger(v) || v < min) throw new RangeError(`redis store ${what} must be an integer ≥ ${min}, got ${v}`);
  return v;
}

/** A session hash as HGETALL gives it (an object from ioredis, a flat list from a script); null if empty. */
export function parseSession (h: Record<string, string> | string[]): SharedSession | null {
  let f: Record<string, string>;
  if (Array.isArray(h)) {
    f = {};
    for (let i = 0; i + 1 < h.length; i += 2) f[h[i]] = h[i + 1];
  } else {
    f = h;
  }
  if (Object.keys(f).length === 0) return null;
  const num = (name: string, dflt: number): number => {
    const v = f[name];
    if (v === undefined || v === '') return dflt;
    const n = Number(v);
    if (!Number.isFinite(n)) throw new TypeError(`session field ${name} is not a number: ${JSON.stringify(v)}`);
    return n;
  };
  return {
    host: f.h === undefined || f.h === '' ? null : f.h,
    attainedMs: num('a', 0),
    criticalPathMs: num('cp', 0),
    contextTokens: num('ct', 0),
    lastMigration: num('lm', -Infinity),
    migrations: num('m', 0),
    version: num('v', 0)
  };
}

function mustSession (flat: string[]): SharedSession {
  const s = parseSession(flat);
  if (s === null) throw new TypeError('the script returned no session');
  return s;
}
