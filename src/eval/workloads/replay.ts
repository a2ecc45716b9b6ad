// Replays a workload's dependencies with given service times, in virtual time: closed loop (each turn sent
// its think time after the previous response ends, sub-agents launched off their parents, Poisson starts or
// N sessions kept running) and open loop (each request at its time). Used for the ideal makespan (service =
// the isolated time the driver measured) and for the order in which a workload's own statistics are taken.
import { requestId, type Workload } from './types.js';
import { runWorkload, type Scheduler } from './runner.js';

export interface ReplayedRequest {
  readonly id: string;
  readonly sessionId: string;
  readonly turn: number;
  readonly sent: number;
  readonly end: number;
}

export interface ReplayResult {
  /** Requests in send order (ties: in the order they became ready). */
  readonly requests: ReplayedRequest[];
  readonly firstSent: number;
  readonly lastEnd: number;
  /** lastEnd − firstSent (0 for an empty workload). */
  readonly makespan: number;
  /** Closed loop: each root session's completion time (its start → the end of its last request or sub-agent),
   *  by root session id; empty for an open-loop workload. */
  readonly sessionCompletion: ReadonlyMap<string, number>;
}

/** Service time of one request in seconds. */
export type ServiceTime = (sessionId: string, turn: number) => number;

/** A binary min-heap of (time, seq) keyed actions: ties run in insertion order. */
class EventQueue {
  #t: number[] = []; #seq: number[] = []; #fn: Array<() => void> = [];
  #n = 0;
  get size (): number { return this.#t.length; }
  push (t: number, fn: () => void): void {
    const t_ = this.#t, s = this.#seq, f = this.#fn;
    let i = t_.length;
    t_.push(t); s.push(this.#n++); f.push(fn);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (t_[p] < t_[i] || (t_[p] === t_[i] && s[p] < s[i])) break;
      this.#swap(i, p); i = p;
    }
  }
  pop (): [number, () => void] {
    const t_ = this.#t, s = this.#seq, f = this.#fn;
    const top: [number, () => void] = [t_[0], f[0]];
    const last = t_.length - 1;
    this.#swap(0, last);
    t_.pop(); s.pop(); f.pop();
    let i = 0;
    for (;;) {
      const l = 2 * i + 1, r = l + 1;
      let m = i;
      if (l < last && (t_[l] < t_[m] || (t_[l] === t_[m] && s[l] < s[m]))) m = l;
      if (r < last && (t_[r] < t_[m] || (t_[r] === t_[m] && s[r] < s[m]))) m = r;
      if (m === i) break;
      this.#swap(i, m); i = m;
    }
    return top;
  }
  #swap (a: number, b: number): void {
    const t_ = this.#t, s = this.#seq, f = this.#fn;
    [t_[a], t_[b]] = [t_[b], t_[a]]; [s[a], s[b]] = [s[b], s[a]]; [f[a], f[b]] = [f[b], f[a]];
  }
}

export function replay (workload: Workload, service: ServiceTime): ReplayResult {
  const q = new EventQueue();
  const requests: ReplayedRequest[] = [];
  const sessions = new Map<string, number>();
  const sched: Scheduler = { at: (t, fn) => q.push(t, () => fn(t)) };
  runWorkload(workload, sched, (d, done) => {
    const end = d.at + checkedService(service, d.sessionId, d.turn);
    requests.push({ id: requestId(d.sessionId, d.turn), sessionId: d.sessionId, turn: d.turn, sent: d.at, end });
    q.push(end, () => done(end));
  }, { sessionDone: (rootId, start, end) => { sessions.set(rootId, end - start); } });
  while (q.size > 0) q.pop()[1]();
  if (workload.kind === 'open') requests.sort((a, b) => a.sent - b.sent);
  return finish(requests, sessions);
}

function checkedService (service: ServiceTime, sessionId: string, turn: number): number {
  const d = service(sessionId, turn);
  if (!(d >= 0) || !Number.isFinite(d)) throw new RangeError(`service time of ${requestId(sessionId, turn)} must be a finite number ≥ 0, got ${d}`);
  return d;
}

function finish (requests: ReplayedRequest[], sessionCompletion: ReadonlyMap<string, number>): ReplayResult {
  if (requests.length === 0) return { requests, firstSent: 0, lastEnd: 0, makespan: 0, sessionCompletion };
  let firstSent = Infinity, lastEnd = -Infinity;
  for (const r of requests) { if (r.sent < firstSent) firstSent = r.sent; if (r.end > lastEnd) lastEnd = r.end; }
  return { requests, firstSent, lastEnd, makespan: lastEnd - firstSent, sessionCompletion };
}
