// Replays a workload's dependencies with given service times, in virtual time: closed loop (each turn sent
// its think time after the previous response ends, sub-agents launched off their parents, Poisson starts or
// N sessions kept running) and open loop (each request at its time). Used for the ideal makespan (service =
// the isolated time the driver measured) and for the order in which a workload's own statistics are taken.
import { requestId, type Arrival, type OpenLoopWorkload, type Session, type Workload } from './types.js';

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
  return workload.kind === 'open' ? replayOpen(workload, service) : replayClosed(workload.sessions, workload.arrival, service);
}

function checkedService (service: ServiceTime, sessionId: string, turn: number): number {
  const d = service(sessionId, turn);
  if (!(d >= 0) || !Number.isFinite(d)) throw new RangeError(`service time of ${requestId(sessionId, turn)} must be a finite number ≥ 0, got ${d}`);
  return d;
}

function replayOpen (w: OpenLoopWorkload, service: ServiceTime): ReplayResult {
  const requests = w.requests.map((r) => {
    const d = checkedService(service, r.sessionId, r.turn);
    return { id: requestId(r.sessionId, r.turn), sessionId: r.sessionId, turn: r.turn, sent: r.at, end: r.at + d };
  });
  return finish(requests);
}

function replayClosed (roots: readonly Session[], arrival: Arrival, service: ServiceTime): ReplayResult {
  const q = new EventQueue();
  const requests: ReplayedRequest[] = [];
  let nextRoot = 0;

  /** Runs one session; onDone gets the time its turns and all its sub-agents have finished. */
  const startSession = (s: Session, at: number, onDone: (t: number) => void): void => {
    let open = 1 + s.children.length;
    let lastEnd = at;
    const partDone = (t: number): void => {
      if (t > lastEnd) lastEnd = t;
      if (--open === 0) onDone(lastEnd);
    };
    // Turn k is ready once turn k−1 has ended and the sub-agents it joins have finished.
    const waits = s.turns.map((_, k) => (k > 0 ? 1 : 0));
    const readyAt = s.turns.map(() => at);
    for (const c of s.children) if (c.joinBeforeTurn !== null) waits[c.joinBeforeTurn]++;
    const arrive = (k: number, t: number): void => {
      if (t > readyAt[k]) readyAt[k] = t;
      if (--waits[k] === 0) {
        const tSend = readyAt[k] + s.turns[k].thinkTime;
        q.push(tSend, () => send(k, tSend));
      }
    };
    const launch = (afterTurn: number, tEnd: number): void => {
      for (const c of s.children) {
        if (c.afterTurn !== afterTurn) continue;
        const tStart = tEnd + c.delay;
        q.push(tStart, () => startSession(c.session, tStart, (tc) => {
          if (c.joinBeforeTurn !== null) arrive(c.joinBeforeTurn, tc);
          partDone(tc);
        }));
      }
    };
    const send = (k: number, tSend: number): void => {
      const end = tSend + checkedService(service, s.id, k);
      requests.push({ id: requestId(s.id, k), sessionId: s.id, turn: k, sent: tSend, end });
      q.push(end, () => {
        launch(k, end);
        if (k + 1 < s.turns.length) arrive(k + 1, end);
        else partDone(end);
      });
    };
    launch(-1, at);
    if (s.turns.length === 0) partDone(at);
    else if (waits[0] === 0) send(0, at);
  };
  const startRoot = (root: Session, t: number): void => {
    startSession(root, t, (tEnd) => {
      if (arrival.mode === 'concurrency' && nextRoot < roots.length) {
        const next = roots[nextRoot++];
        q.push(tEnd, () => startRoot(next, tEnd));
      }
    });
  };

  if (arrival.mode === 'poisson') {
    for (const r of roots) q.push(r.start, () => startRoot(r, r.start));
    nextRoot = roots.length;
  } else {
    for (; nextRoot < Math.min(arrival.n, roots.length); nextRoot++) {
      const r = roots[nextRoot];
      q.push(0, () => startRoot(r, 0));
    }
  }
  while (q.size > 0) q.pop()[1]();
  return finish(requests);
}

function finish (requests: ReplayedRequest[]): ReplayResult {
  if (requests.length === 0) return { requests, firstSent: 0, lastEnd: 0, makespan: 0 };
  let firstSent = Infinity, lastEnd = -Infinity;
  for (const r of requests) { if (r.sent < firstSent) firstSent = r.sent; if (r.end > lastEnd) lastEnd = r.end; }
  return { requests, firstSent, lastEnd, makespan: lastEnd - firstSent };
}
