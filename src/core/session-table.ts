// Typed view of the session table (asm/session-table.ts) for one thread. Reads (get, has, count, stats) are
// safe on any thread; every other method belongs to the table's single writer, the main thread.
import type { Region } from './region.js';

/** One session as stored. Times are ms on the caller's clock; lastMigration is −Infinity if it never moved. */
export interface SessionRecord {
  key: bigint;
  host: number;
  inFlight: number;
  contextTokens: number;
  migrations: number;
  attained: number;
  criticalPath: number;
  wait: number;
  lastActivity: number;
  lastMigration: number;
  ttl: number;
  /** Source pod of a migration in flight (host is its target), −1 for none. */
  migratingFrom: number;
}

export type SessionTimeField = 'attained' | 'criticalPath' | 'wait' | 'lastActivity' | 'lastMigration' | 'ttl';
export type SessionCountField = 'host' | 'inFlight' | 'contextTokens' | 'migrations' | 'migratingFrom';

export interface SessionTableStats {
  capacity: number;
  count: number;
  inserted: number;
  expired: number;
  evicted: number;
  /** Sessions unbound because their host's row was released (unbindPod). */
  unbound: number;
}

type GetFn = (base: number, key: bigint, out: number) => number;
type KeyFn = (base: number, key: bigint) => number;

export class SessionTable {
  readonly #r: Region;
  readonly #base: number;
  readonly #out: number;
  readonly #c: Record<string, number>;
  readonly #get: GetFn;
  readonly #upsert: (base: number, key: bigint, now: number, ttl: number) => number;
  readonly #put: (base: number, key: bigint, src: number) => number;
  readonly #setI32: (base: number, key: bigint, field: number, v: number) => number;
  readonly #setF64: (base: number, key: bigint, field: number, v: number, add: number) => number;
  readonly #setHost: (base: number, key: bigint, pod: number, now: number) => number;
  readonly #addInFlight: (base: number, key: bigint, delta: number, now: number) => number;
  readonly #remove: KeyFn;
  readonly #expire: (base: number, now: number, budget: number) => number;
  readonly #unbindPod: (base: number, pod: number) => number;
  readonly #scan: (base: number, cursor: number, out: number) => number;
  readonly #fields: Record<SessionTimeField | SessionCountField, number>;

  /**
   * `out` is this thread's copy area (SESS_RECORD_BYTES bytes, exclusive to this view); by default a scratch
   * area is claimed for it.
   */
  constructor (region: Region, out: number = region.claimScratch().ptr) {
    this.#r = region;
    this.#base = region.base('TABLE_SESSIONS');
    this.#out = out;
    const c: Record<string, number> = {};
    for (const n of ['SESS_H_CAPACITY', 'SESS_H_COUNT', 'SESS_H_INSERTED', 'SESS_H_EXPIRED', 'SESS_H_EVICTED', 'SESS_H_UNBOUND',
      'SESS_F_KEY', 'SESS_F_HOST', 'SESS_F_IN_FLIGHT', 'SESS_F_CONTEXT_TOKENS', 'SESS_F_MIGRATIONS', 'SESS_F_ATTAINED',
      'SESS_F_CRITICAL_PATH', 'SESS_F_WAIT', 'SESS_F_LAST_ACTIVITY', 'SESS_F_LAST_MIGRATION', 'SESS_F_TTL',
      'SESS_F_MIGRATING_FROM']) {
      c[n] = region.const(n);
    }
    this.#c = c;
    this.#fields = {
      host: c.SESS_F_HOST, inFlight: c.SESS_F_IN_FLIGHT, contextTokens: c.SESS_F_CONTEXT_TOKENS,
      migrations: c.SESS_F_MIGRATIONS, attained: c.SESS_F_ATTAINED, criticalPath: c.SESS_F_CRITICAL_PATH,
      wait: c.SESS_F_WAIT, lastActivity: c.SESS_F_LAST_ACTIVITY, lastMigration: c.SESS_F_LAST_MIGRATION,
      ttl: c.SESS_F_TTL, migratingFrom: c.SESS_F_MIGRATING_FROM
    };
    this.#get = region.fn('sessGet');
    this.#upsert = region.fn('sessUpsert');
    this.#put = region.fn('sessPut');
    this.#setI32 = region.fn('sessSetI32');
    this.#setF64 = region.fn('sessSetF64');
    this.#setHost = region.fn('sessSetHost');
    this.#addInFlight = region.fn('sessAddInFlight');
    this.#remove = region.fn('sessRemove');
    this.#expire = region.fn('sessExpire');
    this.#unbindPod = region.fn('sessUnbindPod');
    this.#scan = region.fn('sessScan');
  }

  /**
   * Any thread, lock-free: every session in the table, in slot order (a hint: a session inserted or moved
   * during the walk may be missed, as asm's sessScan says). Each record is a fresh copy.
   */
  * scan (): Generator<SessionRecord> {
    for (let c = 0; c >= 0;) {
      c = this.#scan(this.#base, c, this.#out);
      if (c >= 0) yield this.#decode(this.#out);
    }
  }

  /** Any thread: a consistent copy of the session, or undefined. */
  get (key: bigint): SessionRecord | undefined {
    if (this.#get(this.#base, key, this.#out) !== 1) return undefined;
    return this.#decode(this.#out);
  }

  /** Any thread: whether the session exists. */
  has (key: bigint): boolean {
    return this.#get(this.#base, key, this.#out) === 1;
  }

  /** Any thread. */
  get count (): number {
    return Atomics.load(this.#r.u32, (this.#base + this.#c.SESS_H_COUNT) >>> 2);
  }

  /** Any thread: capacity, live sessions and the counters of what the bound removed. */
  stats (): SessionTableStats {
    const u64 = (off: number) => Number(Atomics.load(this.#r.u64, (this.#base + off) >>> 3));
    return {
      capacity: this.#r.u32[(this.#base + this.#c.SESS_H_CAPACITY) >>> 2],
      count: this.count,
      inserted: u64(this.#c.SESS_H_INSERTED),
      expired: u64(this.#c.SESS_H_EXPIRED),
      evicted: u64(this.#c.SESS_H_EVICTED),
      unbound: u64(this.#c.SESS_H_UNBOUND)
    };
  }

  /** Writer: creates the session or marks it active (last activity = now, TTL = ttl). True if created. */
  upsert (key: bigint, now: number, ttl: number): boolean {
    const r = this.#upsert(this.#base, key, now, ttl);
    if (r < 0) throw new RangeError('session key must be a nonzero u64');
    return r === 1;
  }

  /** Writer: changes the given fields of an existing session at once. False if it is absent. */
  update (key: bigint, fields: Partial<Omit<SessionRecord, 'key'>>): boolean {
    if (this.#get(this.#base, key, this.#out) !== 1) return false;
    const { i32, f64 } = this.#r;
    for (const [name, v] of Object.entries(fields) as Array<[SessionTimeField | SessionCountField, number]>) {
      const off = this.#fields[name];
      if (off === undefined) throw new RangeError(`unknown session field ${name}`);
      if (name === 'host' || name === 'inFlight' || name === 'contextTokens' || name === 'migrations' || name === 'migratingFrom') {
        const min = name === 'host' || name === 'migratingFrom' ? -1 : 0;
        if (!Number.isInteger(v) || v < min || v > 0x7FFFFFFF) {
          throw new RangeError(`session ${name} must be an integer in [${min}, 2^31), got ${v}`);
        }
        i32[(this.#out + off) >>> 2] = v;
      } else {
        f64[(this.#out + off) >>> 3] = v;
      }
    }
    return this.#put(this.#base, key, this.#out) === 1;
  }

  /** Writer: sets one count field. False if the session is absent. */
  setCount (key: bigint, field: SessionCountField, value: number): boolean {
    return this.#setI32(this.#base, key, this.#fields[field], value) === 1;
  }

  /** Writer: sets one time field, or adds to it when `add`. False if the session is absent. */
  setTime (key: bigint, field: SessionTimeField, value: number, add = false): boolean {
    return this.#setF64(this.#base, key, this.#fields[field], value, add ? 1 : 0) === 1;
  }

  /** Writer: binds the session to `pod`; a change from another pod counts as a migration at `now`. */
  setHost (key: bigint, pod: number, now: number): boolean {
    return this.#setHost(this.#base, key, pod, now) === 1;
  }

  /** Writer: in-flight += delta (never below 0), last activity = now. The new count, or −1 if absent. */
  addInFlight (key: bigint, delta: number, now: number): number {
    return this.#addInFlight(this.#base, key, delta, now);
  }

  /** Writer: removes the session. False if it was absent. */
  remove (key: bigint): boolean {
    return this.#remove(this.#base, key) === 1;
  }

  /** Writer: looks at up to `budget` slots and removes idle sessions past their TTL; returns how many. */
  expire (now: number, budget: number): number {
    return this.#expire(this.#base, now, budget);
  }

  /**
   * Writer: a released row's step (src/core/pod-rows.ts): every session hosted on `pod` becomes unbound (host
   * −1; not a migration), so the row's next backend inherits none; its next turn is routed as a new session's.
   * A full sweep of the table. Returns how many sessions it unbound.
   */
  unbindPod (pod: number): number {
    if (!Number.isInteger(pod) || pod < 0 || pod > 0x7FFFFFFF) throw new RangeError(`pod must be an integer in [0, 2^31), got ${pod}`);
    return this.#unbindPod(this.#base, pod) >>> 0;
  }

  #decode (p: number): SessionRecord {
    const { i32, u32, f64, u64 } = this.#r;
    const f = this.#fields;
    return {
      key: u64[(p + this.#c.SESS_F_KEY) >>> 3],
      host: i32[(p + f.host) >>> 2],
      inFlight: u32[(p + f.inFlight) >>> 2],
      contextTokens: u32[(p + f.contextTokens) >>> 2],
      migrations: u32[(p + f.migrations) >>> 2],
      attained: f64[(p + f.attained) >>> 3],
      criticalPath: f64[(p + f.criticalPath) >>> 3],
      wait: f64[(p + f.wait) >>> 3],
      lastActivity: f64[(p + f.lastActivity) >>> 3],
      lastMigration: f64[(p + f.lastMigration) >>> 3],
      ttl: f64[(p + f.ttl) >>> 3],
      migratingFrom: i32[(p + f.migratingFrom) >>> 2]
    };
  }
}
