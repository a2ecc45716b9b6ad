// Leader election over a Kubernetes Lease, with client-go's leaderelection semantics (a port of the algorithm,
// not of its code), so that among active-passive replicas exactly one reports ready.
//
// Every retry period each replica runs tryAcquireOrRenew: read the lease (a leader that holds it skips the read
// and replaces what it last wrote); if another replica holds it and the lease has not expired, stay a follower;
// otherwise write ourselves in with the resourceVersion read, so of two replicas racing for it one wins and the
// other gets 409 (and re-reads at once). Expiry is judged on this replica's monotonic clock, never on the
// timestamps in the lease: a follower counts leaseDurationSeconds from the moment it last *saw the lease change*
// (its resourceVersion), so clocks that disagree across nodes do not matter, only clock rates.
//
// Why two leaders never both claim readiness: a leader's claim lasts renewDeadline from the moment it *sent* its
// last successful write; that write reached the API server after that moment, and a follower saw it later still,
// and may take over only leaseDuration after seeing it, with a write conditioned on that very resourceVersion.
// As renewDeadline < leaseDuration (src/config/ha.ts checks it), the old leader's claim has ended first, up to the
// difference in clock rates over one lease duration. The leader's calls are aborted at its deadline, and a
// timer steps it down then, however long the API server takes to answer.
//
// On close (SIGTERM) a leader releases the lease (holder '', as client-go's ReleaseOnCancel), so a follower
// takes over within one retry period instead of a lease duration.
import { performance } from 'node:perf_hooks';
import { RETRY_JITTER } from '../config/ha.js';
import type { LeaseClient, LeaseRecord, ObservedLease } from './lease-client.js';

export interface ElectorLog {
  info (obj: object, msg: string): void;
  warn (obj: object, msg: string): void;
}

export interface LeaderElectorOptions {
  client: LeaseClient;
  /** This replica's name in the lease (lease-client.ts replicaIdentity). */
  identity: string;
  leaseDurationSeconds: number;
  renewDeadlineSeconds: number;
  retryPeriodSeconds: number;
  log?: ElectorLog;
  /** Called on every change of leadership (after the state changed). */
  onChange?: (leader: boolean) => void;
  /** Monotonic ms for every expiry decision (performance.now). */
  now?: () => number;
  /** The wall clock written into acquireTime and renewTime (read by people and other tools, not by this code). */
  wallClock?: () => Date;
}

export interface ElectionStats {
  /** Times this replica became the leader. */
  acquired: number;
  /** Times it stopped being the leader (renew deadline passed, lease taken, released on close). */
  lost: number;
  /** Writes refused with 409 (another replica wrote first). */
  conflicts: number;
  /** Calls that failed (API server unreachable, timed out, 5xx, forbidden). */
  errors: number;
}

/** What /ready shows of the election. */
export interface ElectionState {
  role: 'leader' | 'follower';
  identity: string;
  lease: string;
  /** The holder this replica last saw in the lease ('' when released), or null before its first read. */
  holder: string | null;
}

type Attempt = 'leader' | 'follower' | 'conflict' | 'error';

const nop: ElectorLog = { info () {}, warn () {} };

export class LeaderElector {
  readonly stats: ElectionStats = { acquired: 0, lost: 0, conflicts: 0, errors: 0 };
  readonly #o: Required<Omit<LeaderElectorOptions, 'onChange'>> & Pick<LeaderElectorOptions, 'onChange'>;
  readonly #leaseMs: number;
  readonly #renewDeadlineMs: number;
  readonly #retryMs: number;
  #leader = false;
  /** While leader: the end of its claim (monotonic ms). */
  #validUntil = 0;
  #stepDown: NodeJS.Timeout | null = null;
  /** The lease as last seen, and when it was last seen to change (monotonic ms). */
  #observed: ObservedLease | null = null;
  #observedAt = 0;
  #loop: Promise<void> | null = null;
  #closed = false;
  #closing: Promise<void> | null = null;
  #inFlight: AbortController | null = null;
  #wake: (() => void) | null = null;
  /** Whether the last call failed (an outage is logged once, at its start and its end). */
  #failing = false;

  constructor (opts: LeaderElectorOptions) {
    this.#o = { log: nop, now: () => performance.now(), wallClock: () => new Date(), ...opts };
    this.#leaseMs = opts.leaseDurationSeconds * 1000;
    this.#renewDeadlineMs = opts.renewDeadlineSeconds * 1000;
    this.#retryMs = opts.retryPeriodSeconds * 1000;
    if (!(this.#renewDeadlineMs < this.#leaseMs)) throw new RangeError('renewDeadlineSeconds must be less than leaseDurationSeconds');
    if (!(this.#retryMs * RETRY_JITTER < this.#renewDeadlineMs)) throw new RangeError(`retryPeriodSeconds × ${RETRY_JITTER} must be less than renewDeadlineSeconds`);
  }

  /** Leader now: it holds the lease and its last renewal is within the renew deadline. */
  get isLeader (): boolean {
    return this.#leader && this.#o.now() < this.#validUntil;
  }

  get state (): ElectionState {
    return {
      role: this.isLeader ? 'leader' : 'follower',
      identity: this.#o.identity,
      lease: this.#o.client.name,
      holder: this.#observed === null ? null : this.#observed.record.holderIdentity
    };
  }

  /** Starts contending (idempotent); the first attempt runs at once. */
  start (): void {
    if (this.#closed) throw new Error('the elector is closed');
    this.#loop ??= this.#run();
  }

  /** Stops contending; a leader steps down at once and releases the lease (bounded by the renew deadline). */
  close (): Promise<void> {
    this.#closing ??= (async () => {
      this.#closed = true;
      this.#lose('closing');
      this.#inFlight?.abort();
      this.#wake?.();
      await this.#loop;
      if (this.#observed?.record.holderIdentity === this.#o.identity) await this.#release();
    })();
    return this.#closing;
  }

  async #run (): Promise<void> {
    let reread = false;
    while (!this.#closed) {
      const r = await this.#attempt();
      if (this.#closed) break;
      // A 409 means the lease changed under us: read it again at once (once), as client-go does on its next try.
      reread = r === 'conflict' && !reread;
      if (reread) continue;
      // Followers spread their tries (client-go's JitterUntil); the leader renews on time.
      await this.#sleep(this.#leader ? this.#retryMs : this.#retryMs * (1 + Math.random() * (RETRY_JITTER - 1)));
    }
  }

  async #attempt (): Promise<Attempt> {
    const { client, identity } = this.#o;
    const sentAt = this.#o.now();
    const ac = new AbortController();
    this.#inFlight = ac;
    // A leader's calls end at its deadline (past it, it has stepped down anyway); a follower's take at most the
    // renew deadline, so a hung API server does not stall its tries.
    const timeoutMs = this.#leader ? Math.max(1, this.#validUntil - sentAt) : this.#renewDeadlineMs;
    const timer = setTimeout(() => ac.abort(), timeoutMs);
    try {
      // The leader's fast path: replace what it last wrote, without reading first.
      if (this.#leader && this.#observed !== null && this.#observed.record.holderIdentity === identity) {
        const r = await client.replace(this.#next(this.#observed), this.#observed, ac.signal);
        if (r !== 'conflict') return this.#won(r, sentAt);
        this.stats.conflicts++;
      }
      const current = await client.get(ac.signal);
      if (current === null) {
        const r = await client.create(this.#next(null), ac.signal);
        if (r === 'conflict') {
          this.stats.conflicts++;
          return this.#ok('conflict');
        }
        return this.#won(r, sentAt);
      }
      this.#observe(current);
      const holder = current.record.holderIdentity;
      if (holder !== '' && holder !== identity && this.#unexpired()) {
        this.#lose(`the lease is held by ${holder}`);
        return this.#ok('follower');
      }
      const r = await client.replace(this.#next(current), current, ac.signal);
      if (r === 'conflict') {
        this.stats.conflicts++;
        return this.#ok('conflict');
      }
      return this.#won(r, sentAt);
    } catch (err) {
      if (this.#closed) return 'error';
      this.stats.errors++;
      if (!this.#failing) {
        this.#failing = true;
        this.#o.log.warn({ err: (err as Error).message, lease: client.name, leader: this.isLeader }, this.#leader
          ? 'cannot renew the leader lease; still the leader until the renew deadline'
          : 'cannot read or write the leader lease; staying a follower');
      }
      if (this.#leader && this.#o.now() >= this.#validUntil) this.#lose('could not renew within the renew deadline');
      return 'error';
    } finally {
      clearTimeout(timer);
      this.#inFlight = null;
    }
  }

  /** A call answered: an outage, if one was logged, is over. */
  #ok (r: Attempt): Attempt {
    if (this.#failing) {
      this.#failing = false;
      this.#o.log.info({ lease: this.#o.client.name }, 'the leader lease is reachable again');
    }
    return r;
  }

  /** The record to write: a renewal keeps acquireTime and the transition count; a takeover starts anew. */
  #next (prev: ObservedLease | null): LeaseRecord {
    const wall = this.#o.wallClock();
    const renewing = prev !== null && prev.record.holderIdentity === this.#o.identity;
    return {
      holderIdentity: this.#o.identity,
      leaseDurationSeconds: this.#leaseMs / 1000,
      acquireTime: renewing ? prev.record.acquireTime ?? wall : wall,
      renewTime: wall,
      leaseTransitions: prev === null ? 0 : renewing ? prev.record.leaseTransitions : prev.record.leaseTransitions + 1
    };
  }

  #observe (lease: ObservedLease): void {
    if (this.#observed?.resourceVersion !== lease.resourceVersion) this.#observedAt = this.#o.now();
    this.#observed = lease;
  }

  /** Whether the lease as last seen is still in force: leaseDurationSeconds since it last changed. */
  #unexpired (): boolean {
    const seconds = this.#observed?.record.leaseDurationSeconds;
    const ms = typeof seconds === 'number' && seconds > 0 ? seconds * 1000 : this.#leaseMs;
    return this.#o.now() < this.#observedAt + ms;
  }

  #won (lease: ObservedLease, sentAt: number): Attempt {
    this.#observe(lease);
    if (this.#closed) return 'leader';
    // An answer that came after the deadline it was sent under claims nothing (the next try renews it).
    if (this.#o.now() >= sentAt + this.#renewDeadlineMs) {
      this.#lose('the renewal was answered after the renew deadline');
      return this.#ok('follower');
    }
    this.#validUntil = sentAt + this.#renewDeadlineMs;
    if (this.#stepDown !== null) clearTimeout(this.#stepDown);
    this.#stepDown = setTimeout(() => {
      this.#stepDown = null;
      if (this.#leader && this.#o.now() >= this.#validUntil) this.#lose('could not renew within the renew deadline');
    }, Math.max(1, this.#validUntil - this.#o.now()));
    if (!this.#leader) {
      this.#leader = true;
      this.stats.acquired++;
      this.#o.log.info({ lease: this.#o.client.name, identity: this.#o.identity, transitions: lease.record.leaseTransitions }, 'became the leader');
      this.#o.onChange?.(true);
    }
    return this.#ok('leader');
  }

  #lose (why: string): void {
    if (this.#stepDown !== null) clearTimeout(this.#stepDown);
    this.#stepDown = null;
    if (!this.#leader) return;
    this.#leader = false;
    this.#validUntil = 0;
    this.stats.lost++;
    const closing = this.#closed;
    this.#o.log[closing ? 'info' : 'warn']({ lease: this.#o.client.name, identity: this.#o.identity, why }, 'no longer the leader');
    this.#o.onChange?.(false);
  }

  /** Gives the lease up: holder '' and a 1 s duration, so a follower takes it at its next try. */
  async #release (): Promise<void> {
    const { client, identity } = this.#o;
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), this.#renewDeadlineMs);
    try {
      for (let tries = 0; tries < 2; tries++) {
        const prev = this.#observed;
        if (prev === null || prev.record.holderIdentity !== identity) return;
        const wall = this.#o.wallClock();
        const r = await client.replace({ holderIdentity: '', leaseDurationSeconds: 1, acquireTime: wall, renewTime: wall, leaseTransitions: prev.record.leaseTransitions }, prev, ac.signal);
        if (r !== 'conflict') {
          this.#observed = r;
          this.#o.log.info({ lease: client.name, identity }, 'released the leader lease');
          return;
        }
        // Changed since we last saw it: still ours (a renewal answered after we stopped waiting)? Then again.
        const current = await client.get(ac.signal);
        if (current === null) return;
        this.#observed = current;
      }
    } catch (err) {
      this.#o.log.warn({ err: (err as Error).message, lease: client.name }, 'could not release the leader lease; a follower takes over when it expires');
    } finally {
      clearTimeout(timer);
    }
  }

  #sleep (ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      function done (): void { clearTimeout(t); resolve(); }
      this.#wake = () => { this.#wake = null; done(); };
    });
  }
}
