// The VTC scheduler's accounts (Sheng et al., "Fairness in Serving Large Language Models", OSDI'24), for the
// admission queue: each user's virtual token counter lives in the host's UserUsage table; this keeps who is
// active (requests queued or in flight), which queued jobs are whose (their key is the counter, which grows
// as the user is served), and charges service: input tokens when a request is dispatched, output tokens when
// it ends (the paper charges decode tokens as they are generated; a gateway sees them at the end, or per chunk).
// A user that becomes active is lifted to the least counter of the active users, so idling earns no credit.
// Main thread only (the host's). Bounded by the users with something queued or in flight.
import type { Job } from './admission.js';
import type { UserUsage } from './user-usage.js';

export class VtcAccounts<T> {
  /** Requests queued or in flight, per user. */
  readonly #active = new Map<bigint, number>();
  /** Queued jobs per user, whose keys follow the user's counter. */
  readonly #queued = new Map<bigint, Set<Job<T>>>();

  constructor (readonly users: UserUsage) {}

  /** A request of `user` arrives: the user is active from now; returns the counter its job waits with. */
  enter (user: bigint): number {
    const n = this.#active.get(user) ?? 0;
    this.#active.set(user, n + 1);
    return n === 0 ? this.users.lift(user) : this.users.counter(user);
  }

  /** Its job waits in the queue. */
  queued (user: bigint, job: Job<T>): void {
    let s = this.#queued.get(user);
    if (s === undefined) this.#queued.set(user, (s = new Set()));
    s.add(job);
  }

  /** The job left the queue (released, cancelled, dropped). */
  unqueued (user: bigint, job: Job<T>): void {
    const s = this.#queued.get(user);
    if (s === undefined) return;
    s.delete(job);
    if (s.size === 0) this.#queued.delete(user);
  }

  /**
   * Charges `tokens` of service to the user; returns its jobs still queued and the new counter, for the
   * caller to re-key them (a served user's next request waits behind the less served).
   */
  charge (user: bigint, inputTokens: number, outputTokens: number): { counter: number; queued: ReadonlySet<Job<T>> | null } {
    const counter = this.users.charge(user, this.users.weigh(inputTokens, outputTokens));
    return { counter, queued: this.#queued.get(user) ?? null };
  }

  /** A request of the user ended (or left the queue unserved): inactive once it has nothing left. */
  leave (user: bigint): void {
    const n = (this.#active.get(user) ?? 0) - 1;
    if (n > 0) {
      this.#active.set(user, n);
      return;
    }
    this.#active.delete(user);
    this.users.idle(user);
  }

  get activeUsers (): number {
    return this.#active.size;
  }
}
