// Runs an engine core on a real clock: a step's outputs are delivered `duration × timeScale` wall seconds after
// it starts, and steps run back to back while the engine has work. The engine sees modelled seconds.
import type { RequestOutput, SimRequest, StepResult } from './engine-types.js';
import type { SimEngine } from './engine.js';

export type OutputListener = (out: RequestOutput, stepStart: number, stepEnd: number) => void;
/** KV events of a step (at its end) or raised outside one (abort, release, reset), in emission order. */
export type KvEventsListener = (events: StepResult['kvEvents']) => void;

export class RealClockHost {
  private readonly listeners = new Map<string, OutputListener>();
  private modelClock = 0;
  /** The last request's arrival time (model seconds). */
  private lastArrival = -Infinity;
  private wallAnchor = performance.now();
  /** Modelled end of the last step, to recognise the next one as chained to it. */
  private chainEnd = -1;
  private inFlight = false;
  private delivering = false;
  private closed = false;
  private timer: NodeJS.Timeout | null = null;
  private immediate: NodeJS.Immediate | null = null;
  /** Set when the engine threw: the host stops and /health answers 503, as vLLM does on EngineDeadError. */
  dead: Error | null = null;
  steps = 0;
  listenerErrors = 0;
  onListenerError: (err: Error) => void = () => {};

  constructor (readonly engine: SimEngine, private readonly timeScale: number, private readonly onKvEvents: KvEventsListener,
    private readonly onStepEnd: (result: StepResult) => void = () => {}) {}

  /** Modelled seconds now. During a step it reads as the step's end: arrivals then join the next step, as in vLLM. */
  now (): number {
    if (this.timeScale === 0) return this.modelClock;
    return this.modelClock + Math.max(0, performance.now() - this.wallAnchor) / 1000 / this.timeScale;
  }

  get pending (): number { return this.listeners.size; }

  /** Throws what engine.addRequest throws (RangeError, ContextLengthError, KvCapacityError: bad request; EngineFullError: queue full). */
  submit (req: SimRequest, listener: OutputListener): void {
    if (this.closed || this.dead !== null) throw new Error('engine is not running');
    // vLLM stamps each request's arrival with time.time(), distinct and in the order they came. The model clock
    // stands still while a step runs, so requests that arrive during one step are spaced by a microsecond, in
    // order, rather than tied (a tie would be broken by request id: not the order they came).
    if (req.arrivalTime <= this.lastArrival) req.arrivalTime = this.lastArrival + 1e-6;
    this.lastArrival = req.arrivalTime;
    this.engine.addRequest(req);
    this.listeners.set(req.id, listener);
    this.schedule();
  }

  /** Client gone (or its outcome settled on the host side): the engine drops it; nothing more is delivered. */
  abort (id: string): void {
    this.listeners.delete(id);
    if (this.engine.abortRequest(id)) this.afterOutOfStepChange();
  }

  releaseHeld (id: string): boolean {
    const released = this.engine.releaseHeld(id);
    if (released) this.afterOutOfStepChange();
    return released;
  }

  /** Held blocks past their timeout are freed now rather than at the next step (an idle engine takes none). */
  expireHolds (): void {
    this.engine.expireHolds(this.now());
    this.afterOutOfStepChange();
  }

  /** vLLM's reset_prefix_cache; false while blocks are in use. */
  resetPrefixCache (): boolean {
    const ok = this.engine.resetPrefixCache();
    this.afterOutOfStepChange();
    return ok;
  }

  private afterOutOfStepChange (): void {
    const events = this.engine.takeKvEvents();
    if (events.length > 0) this.onKvEvents(events);
    this.schedule();
  }

  /**
   * Plans the next step: now if there is work, later if the engine only waits on a transfer, never if idle.
   * A step chained to the previous one starts at its modelled end, so host overhead (timer lateness, I/O)
   * never leaks into modelled time; after idling, the wall time that passed counts (divided by the scale).
   */
  private schedule (chained = false): void {
    if (this.inFlight || this.delivering || this.closed || this.dead !== null) return;
    const now = chained ? this.modelClock : this.now();
    const next = this.engine.nextStepTime(now);
    if (next === null) return;
    if (this.timer !== null) { clearTimeout(this.timer); this.timer = null; }
    const waitMs = (next - now) * this.timeScale * 1000;
    if (waitMs >= 1) {
      this.timer = setTimeout(() => { this.timer = null; this.schedule(); }, waitMs);
      return;
    }
    const start = Math.max(next, now);
    const fixedStart = chained || this.timeScale === 0;
    this.inFlight = true;
    this.immediate = setImmediate(() => { this.immediate = null; this.runStep(fixedStart ? start : this.now()); });
  }

  private runStep (start: number): void {
    if (this.closed) return;
    let result: StepResult;
    try {
      result = this.engine.step(start);
    } catch (err) {
      this.die(err as Error, start);
      return;
    }
    this.steps++;
    const end = start + result.duration;
    this.modelClock = end;
    const delayMs = result.duration * this.timeScale * 1000;
    // A step chained to the previous one is due delayMs after the previous step was due, so per-step host
    // overhead does not pile up; a host more than 20 ms behind stops trying to catch up.
    const wallNow = performance.now();
    const chainedStep = this.steps > 1 && start === this.chainEnd;
    const base = chainedStep && wallNow - this.wallAnchor < 20 ? this.wallAnchor : wallNow;
    this.chainEnd = end;
    this.wallAnchor = base + delayMs;
    const deliver = (): void => {
      this.timer = null;
      this.immediate = null;
      if (this.closed) return;
      this.inFlight = false;
      // Aborts and submits made by listeners wait: the next step is chained to this one.
      this.delivering = true;
      try {
        this.deliver(result, start, end);
      } finally {
        this.delivering = false;
      }
      this.schedule(true);
    };
    this.#at(this.wallAnchor, deliver);
  }

  /**
   * Runs `fn` once performance.now() reaches `deadline` (ms). Timers have a 1 ms grain, so the last part is
   * waited out with immediates: delivering a sub-millisecond step at once would let modelled time run ahead of
   * the wall clock at small time scales (a 0.1 scale would see decode steps finish early, every step).
   */
  #at (deadline: number, fn: () => void): void {
    const left = deadline - performance.now();
    if (left >= 1) {
      this.timer = setTimeout(() => { this.timer = null; this.#at(deadline, fn); }, Math.floor(left));
    } else if (left > 0) {
      this.immediate = setImmediate(() => { this.immediate = null; this.#at(deadline, fn); });
    } else {
      fn();
    }
  }

  private deliver (result: StepResult, start: number, end: number): void {
    if (result.kvEvents.length > 0) this.onKvEvents(result.kvEvents);
    this.onStepEnd(result);
    for (const out of result.outputs) {
      const l = this.listeners.get(out.id);
      if (l === undefined) continue;
      if (out.finished !== null) this.listeners.delete(out.id);
      try {
        l(out, start, end);
      } catch (err) {
        // A handler bug must not stop the engine for everyone else: drop that request only.
        this.listenerErrors++;
        this.abort(out.id);
        this.onListenerError(err as Error);
      }
    }
  }

  private die (err: Error, now: number): void {
    this.dead = err;
    this.inFlight = false;
    const listeners = [...this.listeners];
    this.listeners.clear();
    for (const [id, l] of listeners) l({ id, newTokenIds: [], numCachedTokens: 0, finished: 'abort', stopReason: null }, now, now);
  }

  close (): void {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    if (this.immediate !== null) clearImmediate(this.immediate);
    this.listeners.clear();
  }
}
