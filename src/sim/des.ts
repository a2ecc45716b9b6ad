// Discrete-event host: many engine cores in one process on a virtual clock. Events (submissions, step ends,
// wake-ups, user timers) sit in a binary min-heap ordered by (time, insertion sequence), so a run is a pure
// function of its inputs and seed. An engine steps as soon as it has work; a step that takes d seconds delivers
// its outputs and KV events at t + d, then the engine steps again. Engines given one OffloadStore in their options
// share it on the same virtual clock (a block saved by a step is visible from that step's end).
import type { RequestOutput, SimRequest, StepResult } from './engine-types.js';
import { SimEngine, type SimEngineOptions } from './engine.js';
import { nextRandom } from './token-generator.js';

export interface DesCallbacks {
  /** The first output carrying a token. */
  onFirstToken?: (t: number, out: RequestOutput) => void;
  /** Every output carrying tokens (the first one too). */
  onTokens?: (t: number, out: RequestOutput) => void;
  /** The finishing output: out.numCachedTokens, out.metrics. */
  onFinish?: (t: number, out: RequestOutput) => void;
  /** addRequest refused the request (bad input, full queue); without it the error is thrown out of run(). */
  onError?: (t: number, err: Error) => void;
}

const enum Kind { Submit, StepEnd, Wake, Timer, Abort }

interface Ev {
  t: number;
  seq: number;
  kind: Kind;
  engine: number;
  req: SimRequest | null;
  cb: DesCallbacks | null;
  res: StepResult | null;
  fn: ((t: number) => void) | null;
  id: string | null;
}

interface Live { cb: DesCallbacks; sawToken: boolean }

export type KvEventListener = (engine: number, t: number, events: StepResult['kvEvents']) => void;

export class DesHost {
  now = 0;
  readonly engines: SimEngine[] = [];
  /** Called with every non-empty batch of KV events (an engine step's, or one raised by abort/release). */
  onKvEvents: KvEventListener | null = null;
  /** Counters. */
  steps = 0;
  events = 0;
  #heap: Ev[] = [];
  #seq = 0;
  #busy: boolean[] = [];
  #wakeAt: number[] = [];
  #live: Array<Map<string, Live>> = [];
  #rng: { rng: number };
  #stopped = false;

  constructor (opts: { seed?: number } = {}) {
    this.#rng = { rng: (opts.seed ?? 1) >>> 0 };
  }

  /** A uniform draw in [0, 1) from the host's seeded stream (for workloads that want one). */
  random (): number { return nextRandom(this.#rng); }

  addEngine (opts: SimEngineOptions): number {
    this.engines.push(new SimEngine(opts));
    this.#busy.push(false);
    this.#wakeAt.push(Infinity);
    this.#live.push(new Map());
    return this.engines.length - 1;
  }

  /** Submits `req` to engine `engine` at virtual time `at` (≥ now); its arrivalTime becomes `at`. */
  submit (engine: number, req: SimRequest, at: number, cb: DesCallbacks = {}): void {
    this.#engineIndex(engine);
    if (at <= this.now) this.#doSubmit(engine, req, this.now, cb);
    else this.#push(at, Kind.Submit, engine, req, cb, null, null, null);
  }

  abort (engine: number, id: string, at = this.now): void {
    this.#engineIndex(engine);
    this.#push(Math.max(at, this.now), Kind.Abort, engine, null, null, null, null, id);
  }

  /** Runs `fn(t)` at virtual time `at` (tool delays, samplers). */
  at (at: number, fn: (t: number) => void): void {
    this.#push(Math.max(at, this.now), Kind.Timer, -1, null, null, null, fn, null);
  }

  /** Ends run() after the event being processed (a driver giving up on a run that cannot progress). */
  stop (): void { this.#stopped = true; }

  /** Processes events up to and including time `until` (default: until nothing is left, or stop()), then sets now. */
  run (until = Infinity): void {
    const h = this.#heap;
    this.#stopped = false;
    while (!this.#stopped && h.length > 0 && h[0].t <= until) {
      const e = this.#pop();
      this.now = e.t;
      this.events++;
      switch (e.kind) {
        case Kind.Submit: this.#doSubmit(e.engine, e.req!, e.t, e.cb!); break;
        case Kind.StepEnd: this.#stepEnd(e.engine, e.t, e.res!); break;
        case Kind.Wake:
          // A later wake that was skipped because this one was pending is re-derived by the kick.
          if (this.#wakeAt[e.engine] === e.t) this.#wakeAt[e.engine] = Infinity;
          if (!this.#busy[e.engine]) this.#kick(e.engine, e.t);
          break;
        case Kind.Timer: e.fn!(e.t); break;
        case Kind.Abort: {
          const eng = this.engines[e.engine];
          if (eng.abortRequest(e.id!)) this.#live[e.engine].delete(e.id!);
          this.#flushEvents(e.engine, e.t, eng.takeKvEvents());
          if (!this.#busy[e.engine]) this.#kick(e.engine, e.t);
          break;
        }
      }
    }
    if (!this.#stopped && until !== Infinity && until > this.now) this.now = until;
  }

  get pendingEvents (): number { return this.#heap.length; }

  #engineIndex (i: number): void {
    if (!Number.isInteger(i) || i < 0 || i >= this.engines.length) throw new RangeError(`no engine ${i} (there are ${this.engines.length})`);
  }

  #doSubmit (engine: number, req: SimRequest, t: number, cb: DesCallbacks): void {
    req.arrivalTime = t;
    try {
      this.engines[engine].addRequest(req);
    } catch (err) {
      if (cb.onError === undefined) throw err;
      cb.onError(t, err as Error);
      return;
    }
    this.#live[engine].set(req.id, { cb, sawToken: false });
    // Wake through the heap rather than stepping now, so requests arriving at the same instant share a step.
    if (!this.#busy[engine] && t < this.#wakeAt[engine]) {
      this.#wakeAt[engine] = t;
      this.#push(t, Kind.Wake, engine, null, null, null, null, null);
    }
  }

  #kick (engine: number, t: number): void {
    const eng = this.engines[engine];
    // Two rounds at most: a step that schedules nothing marks the engine stalled, so the second answer differs.
    for (let round = 0; round < 2; round++) {
      const next = eng.nextStepTime(t);
      if (next === null) return;
      if (next > t) {
        if (next < this.#wakeAt[engine]) {
          this.#wakeAt[engine] = next;
          this.#push(next, Kind.Wake, engine, null, null, null, null, null);
        }
        return;
      }
      const res = eng.step(t);
      this.steps++;
      if (res.duration > 0) {
        this.#busy[engine] = true;
        this.#push(t + res.duration, Kind.StepEnd, engine, null, null, res, null, null);
        return;
      }
      this.#flushEvents(engine, t, res.kvEvents);
    }
  }

  #stepEnd (engine: number, t: number, res: StepResult): void {
    this.#busy[engine] = false;
    this.#flushEvents(engine, t, res.kvEvents);
    const live = this.#live[engine];
    for (const out of res.outputs) {
      const l = live.get(out.id);
      if (l === undefined) continue;
      if (out.newTokenIds.length > 0) {
        if (!l.sawToken) { l.sawToken = true; l.cb.onFirstToken?.(t, out); }
        l.cb.onTokens?.(t, out);
      }
      if (out.finished !== null) {
        live.delete(out.id);
        l.cb.onFinish?.(t, out);
      }
    }
    if (!this.#busy[engine]) this.#kick(engine, t);
  }

  #flushEvents (engine: number, t: number, events: StepResult['kvEvents']): void {
    if (events.length > 0 && this.onKvEvents !== null) this.onKvEvents(engine, t, events);
  }

  #push (t: number, kind: Kind, engine: number, req: SimRequest | null, cb: DesCallbacks | null, res: StepResult | null,
    fn: ((t: number) => void) | null, id: string | null): void {
    if (!Number.isFinite(t)) throw new RangeError(`event time must be finite, got ${t}`);
    const h = this.#heap;
    const e: Ev = { t, seq: this.#seq++, kind, engine, req, cb, res, fn, id };
    let i = h.length;
    h.push(e);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(e, h[p])) break;
      h[i] = h[p];
      i = p;
    }
    h[i] = e;
  }

  #pop (): Ev {
    const h = this.#heap;
    const top = h[0];
    const last = h.pop()!;
    if (h.length > 0) {
      let i = 0;
      const n = h.length;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        const c = r < n && before(h[r], h[l]) ? r : l;
        if (!before(h[c], last)) break;
        h[i] = h[c];
        i = c;
      }
      h[i] = last;
    }
    return top;
  }
}

function before (a: Ev, b: Ev): boolean {
  return a.t < b.t || (a.t === b.t && a.seq < b.seq);
}
