// Plain TypeScript session table on a Map, with the observable semantics of asm/session-table.ts (upsert,
// fields, migrations, in-flight clamped at 0, idle expiry). At the bound it expires every idle session past its
// TTL, else evicts the least recently active one (Map order), where the kernel scans a bounded window and uses
// CLOCK: which session leaves at the bound is the one place the two may differ. Test oracle and bench baseline.
import type { SessionRecord, SessionCountField, SessionTimeField } from '../session-table.js';

export class ReferenceSessionTable {
  readonly capacity: number;
  inserted = 0;
  expired = 0;
  evicted = 0;
  unbound = 0;
  readonly #m = new Map<bigint, SessionRecord>();

  constructor (capacity: number) {
    this.capacity = Math.max(1, capacity);
  }

  get count (): number {
    return this.#m.size;
  }

  get (key: bigint): SessionRecord | undefined {
    const r = this.#m.get(key);
    return r && { ...r };
  }

  upsert (key: bigint, now: number, ttl: number): boolean {
    if (key === 0n) throw new RangeError('session key must be a nonzero u64');
    const r = this.#m.get(key);
    if (r) {
      r.lastActivity = now;
      r.ttl = ttl;
      this.#m.delete(key);   // keep Map order = recency
      this.#m.set(key, r);
      return false;
    }
    if (this.#m.size >= this.capacity && this.expire(now) === 0) {
      const oldest = this.#m.keys().next().value as bigint;
      this.#m.delete(oldest);
      this.evicted++;
    }
    this.#m.set(key, {
      key, host: -1, inFlight: 0, contextTokens: 0, migrations: 0, attained: 0, criticalPath: 0, wait: 0,
      lastActivity: now, lastMigration: -Infinity, ttl, migratingFrom: -1
    });
    this.inserted++;
    return true;
  }

  update (key: bigint, fields: Partial<Omit<SessionRecord, 'key'>>): boolean {
    const r = this.#m.get(key);
    if (!r) return false;
    Object.assign(r, fields);
    return true;
  }

  setCount (key: bigint, field: SessionCountField, value: number): boolean {
    return this.update(key, { [field]: field === 'host' || field === 'migratingFrom' ? value | 0 : value >>> 0 });
  }

  setTime (key: bigint, field: SessionTimeField, value: number, add = false): boolean {
    const r = this.#m.get(key);
    if (!r) return false;
    r[field] = add ? r[field] + value : value;
    return true;
  }

  setHost (key: bigint, pod: number, now: number): boolean {
    const r = this.#m.get(key);
    if (!r) return false;
    if (r.host >= 0 && r.host !== pod) {
      r.migrations++;
      r.lastMigration = now;
    }
    r.host = pod;
    return true;
  }

  addInFlight (key: bigint, delta: number, now: number): number {
    const r = this.#m.get(key);
    if (!r) return -1;
    r.inFlight = Math.max(0, r.inFlight + delta);
    r.lastActivity = now;
    return r.inFlight;
  }

  remove (key: bigint): boolean {
    return this.#m.delete(key);
  }

  /** Unbinds every session hosted on `pod` (host −1, not a migration); returns how many. */
  unbindPod (pod: number): number {
    if (pod < 0) return 0;
    let n = 0;
    for (const r of this.#m.values()) {
      if (r.migratingFrom === pod) r.migratingFrom = -1;
      if (r.host === pod) {
        r.host = -1;
        r.migratingFrom = -1;
        n++;
      }
    }
    this.unbound += n;
    return n;
  }

  /** Removes every session with nothing in flight idle for at least its TTL; returns how many. */
  expire (now: number): number {
    let n = 0;
    for (const [k, r] of this.#m) {
      if (r.inFlight === 0 && now - r.lastActivity >= r.ttl) {
        this.#m.delete(k);
        n++;
      }
    }
    this.expired += n;
    return n;
  }
}
