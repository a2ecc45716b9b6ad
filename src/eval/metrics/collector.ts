// The metrics of one run of one policy (evaluation.md, "Metrics"). A driver feeds it events in time order
// (virtual seconds for `des`, unscaled seconds for `e2e`) and asks for a plain-JSON summary at the end.
//
//   requestSent → firstToken → requestFinished | requestFailed      (per request, by id)
//   sessionDone                      (a root session and all its sub-agents have finished)
//   pendingPrefill                   (every 100 ms: per-engine prompt tokens queued or in progress)
//   migration, routingDecision       (as they happen; a migration may carry its mode and ok: false when failed)
import { EAR_DEFAULTS } from '../../core/policies/ear.js';
import { ApcBound } from './apc-bound.js';
import { amplification } from './amplification.js';
import { Latency, percentile, type LatencySummary } from './latency.js';
import { MigrationStats, type Migration, type MigrationSummary } from './migrations.js';
import { arrivalRate, couplingOf, type CouplingSummary } from './coupling.js';

export type { Migration, MigrationMode, MigrationSummary, MigrationAccuracy } from './migrations.js';
export type { CouplingSummary } from './coupling.js';

export interface CollectorOptions {
  /** Engines in the run (the length of every pendingPrefill sample). */
  engines: number;
  /** Block size of the workload's block ids (enables the APC upper bounds). */
  blockSize?: number;
  /** Goodput SLO on TTFT, seconds. */
  ttftSlo?: number;
  /** A session moved again within tCool seconds of its previous move is a thrash; default ear's tCool. */
  tCool?: number;
  /** Pending prefill (tokens) above which an engine is hot (the policy's tHot): a move was accurate when its
   *  target stayed at or below it for the session's next `accuracyTurns` sends. Unset: accuracy is null. */
  tHot?: number;
  /** Turns after a move that judge its accuracy (default 3). */
  accuracyTurns?: number;
  /** Λ (root sessions/s) for the dispatch-coupling curve; default estimated from the root sessions' starts. */
  sessionArrivalRate?: number;
  /** N (requests per root session) for the curve; default requests sent / root sessions. */
  turnsPerSession?: number;
  /** G (s, mean tool gap) for the curve; default measured: a response's end to its session's next send. */
  toolGap?: number;
  /** Points kept in the pending-prefill timeline for plots (bucket maxima). */
  timelinePoints?: number;
  /** Migration events kept for plots (all are counted). */
  migrationEventsKept?: number;
  /** Per-engine samples stored for the timeline (2.8 h at 10 Hz by default); later samples still count for
   *  the hotspot index, and the timeline reports how many it left out. */
  timelineSamplesKept?: number;
}

export interface SentRequest {
  id: string;
  sessionId: string;
  /** The root of the session's tree (itself for a session with no parent): the scope of "intra-session" reuse. */
  rootSessionId?: string;
  at: number;
  promptTokens: number;
  /** Workload block ids of the prompt (SessionPrompt.blocks), for the APC bounds. */
  blocks?: ArrayLike<number>;
  /** Seconds its prefill takes alone on an idle engine holding every reusable prefix (for ttftExcess). */
  idealTtft?: number;
  /**
   * Leading tokens of this prompt that an engine had held for the session: the prefix it shares with the
   * session's previous prompt, in whole engine blocks, once that prompt was computed (for `recompute`).
   */
  heldTokens?: number;
}

export interface FinishedRequest {
  at: number;
  /** Prompt tokens the engine served from its prefix cache (`usage.prompt_tokens_details.cached_tokens`). */
  cachedTokens: number;
  /** Prompt tokens as the engine counted them, when they are not the ones sent (e2e over a text API: the
   *  workload's text re-tokenized in the chat template). The APC is cached over these; the bounds stay on the
   *  sent tokens (the workload's blocks). Default: the sent `promptTokens`. */
  promptTokens?: number;
  outputTokens: number;
  /** TTFT the engine itself measured (e2e), for the gateway's added latency. */
  engineTtft?: number;
  /** Seconds from the engine's arrival to its first scheduling (its waiting queue: seats, token budget, KV). */
  engineQueue?: number;
}

export interface MetricsSummary {
  requests: { sent: number; completed: number; failed: number; incomplete: number };
  /** µs */
  ttft: LatencySummary;
  /**
   * TTFT less the request's ideal TTFT (its prefill alone on an idle engine holding the session's whole prefix),
   * µs: the queueing and cache misses a router can act on. Empty when the driver gives no ideal.
   */
  ttftExcess: LatencySummary;
  tpot: LatencySummary;
  e2e: LatencySummary;
  sessionCompletion: LatencySummary;
  /** TTFT CDF for plots: [µs, percentile]. */
  ttftCdf: Array<[number, number]>;
  /**
   * Prefix recompute (docs/evaluation.md): over completed requests, Σ max(0, held − cached) ÷ Σ held, where held
   * is the request's `heldTokens` and cached the tokens its engine served from cache. share null with none held.
   */
  recompute: { heldTokens: number; recomputedTokens: number; share: number | null };
  apc: {
    value: number;
    /** One infinite cache over all requests in order; null without block ids. */
    bound: number | null;
    /** The same restricted to intra-session reuse. */
    intraSessionBound: number | null;
    ratio: number | null;
    promptTokens: number;
    cachedTokens: number;
  };
  /** Per 100 ms sample, max / mean of the engines' pending prefill: `mean` and `p99` over the samples with any
   *  load (one busy engine among idle ones reads K however little it holds); `loadWeighted` = Σ max / Σ mean over
   *  all samples, which the heavily loaded moments dominate. 0 when no sample had load. */
  hotspot: { mean: number; p99: number; loadWeighted: number; samples: number; loadedSamples: number };
  makespan: number;
  idealMakespan: number | null;
  amplification: number | null;
  /** Per root session: its completion time over its completion time in the ideal run; over the sessions done
   *  in both with an ideal time > 0 (null when there are none). */
  /** Each session's completion against its ideal; idealMean (s): the mean of those ideals, the floor under the
   *  mean session completion that no scheduler or placement can go below. */
  sessionSlowdown: { mean: number | null; p90: number | null; sessions: number; idealMean: number | null };
  throughput: { outputTokensPerSec: number; sessionsPerMin: number; outputTokens: number; sessionsCompleted: number };
  goodput: { ttftSlo: number; share: number };
  /** The migration microbenchmark (migrations.ts). */
  migrations: MigrationSummary;
  /** Mean turn service time W′ with the workload's Λ and N, for the dispatch-coupling plot (coupling.ts). */
  coupling: CouplingSummary;
  failures: Record<string, number>;
  gateway: { decision: LatencySummary; addedLatency: LatencySummary };
  timeline: { t: number[]; pendingPrefill: number[][]; migrations: Array<{ t: number; from: number; to: number }>; droppedSamples: number };
  /**
   * Short and long sessions (root sessions with at most / more than the median number of requests): their
   * requests' TTFT and their completion times. What an admission scheduler trades between them.
   */
  bySessionLength: { medianRequests: number; short: SessionClassSummary; long: SessionClassSummary };
  /** Time requests waited in the gateway's admission queue (s); the longest is the starvation figure. */
  admissionWait: LatencySummary;
  /** Time requests waited in the engine's queue before their first step (s; des: from the engine's figures). */
  engineQueue: LatencySummary;
}

export interface SessionClassSummary {
  sessions: number;
  /** s */
  ttft: LatencySummary;
  completion: LatencySummary;
}

interface Open { sessionId: string; root: string; sent: number; first: number; prompt: number; boundAll: number; boundIntra: number; idealTtft: number; held: number }

export class MetricsCollector {
  readonly #engines: number;
  readonly #slo: number;
  readonly #lambda: number | undefined;
  readonly #turns: number | undefined;
  readonly #gapOption: number | undefined;
  /** Per session: when its last response ended, until its next send (the tool gap G). */
  readonly #lastFinish = new Map<string, number>();
  #gapSum = 0; #gaps = 0;
  readonly #timelinePoints: number;
  readonly #eventsKept: number;
  readonly #samplesKept: number;
  #droppedSamples = 0;
  readonly #bound: ApcBound | null;
  readonly #open = new Map<string, Open>();
  readonly #ttft = new Latency(); readonly #tpot = new Latency(); readonly #e2e = new Latency();
  readonly #ttftExcess = new Latency();
  readonly #session = new Latency(); readonly #decision = new Latency(); readonly #added = new Latency();
  readonly #mig: MigrationStats;
  /** The latest pendingPrefill sample (the accuracy check reads the target's load at each send). */
  #lastSample: Float64Array | null = null;
  /** First send of each root session, for Λ. */
  readonly #rootStarts: number[] = [];
  #e2eSum = 0;
  readonly #sessionStart = new Map<string, number>();
  /** Completion time of each root session done. */
  readonly #sessionTime = new Map<string, number>();
  readonly #failures: Record<string, number> = {};
  readonly #moves: Array<{ t: number; from: number; to: number }> = [];
  readonly #sampleT: number[] = [];
  readonly #samples: Float64Array[] = [];
  readonly #index: number[] = [];
  #sumMax = 0; #sumMean = 0;
  #sent = 0; #completed = 0; #failed = 0; #good = 0;
  /** Prompt tokens as the engine counted them (the APC's denominator) and as sent (the bounds'). */
  #held = 0; #recomputed = 0;
  #prompt = 0; #sentPrompt = 0; #cached = 0; #boundAll = 0; #boundIntra = 0; #output = 0; #sessionsDone = 0;
  #firstSent = Infinity; #lastEnd = -Infinity;
  #blocksSeen = true;
  /** Per completed request: its root session and TTFT, split by session length at the end. */
  readonly #ttftRoots: string[] = [];
  readonly #ttftValues: number[] = [];
  readonly #requestsPerRoot = new Map<string, number>();
  readonly #wait = new Latency();
  readonly #engineQueue = new Latency();

  constructor (o: CollectorOptions) {
    if (!(Number.isInteger(o.engines) && o.engines > 0)) throw new RangeError(`engines must be an integer > 0, got ${o.engines}`);
    this.#engines = o.engines;
    this.#slo = o.ttftSlo ?? 2;
    this.#mig = new MigrationStats({ tCool: o.tCool ?? EAR_DEFAULTS.tCool, tHot: o.tHot, k: o.accuracyTurns ?? 3 });
    this.#lambda = o.sessionArrivalRate;
    this.#turns = o.turnsPerSession;
    this.#gapOption = o.toolGap;
    this.#timelinePoints = o.timelinePoints ?? 600;
    this.#eventsKept = o.migrationEventsKept ?? 2000;
    this.#samplesKept = o.timelineSamplesKept ?? 100_000;
    this.#bound = o.blockSize === undefined ? null : new ApcBound(o.blockSize);
  }

  requestSent (r: SentRequest): void {
    if (this.#open.has(r.id)) throw new Error(`request ${r.id} sent twice`);
    const root = r.rootSessionId ?? r.sessionId;
    let boundAll = 0, boundIntra = 0;
    if (this.#bound !== null && r.blocks !== undefined) ({ all: boundAll, intra: boundIntra } = this.#bound.observe(root, r.blocks, r.promptTokens));
    else this.#blocksSeen = false;
    this.#open.set(r.id, { sessionId: r.sessionId, root, sent: r.at, first: -1, prompt: r.promptTokens, boundAll, boundIntra, idealTtft: r.idealTtft ?? NaN, held: r.heldTokens ?? 0 });
    if (!this.#sessionStart.has(r.sessionId)) this.#sessionStart.set(r.sessionId, r.at);
    const n = this.#requestsPerRoot.get(root) ?? 0;
    if (n === 0) this.#rootStarts.push(r.at);
    this.#requestsPerRoot.set(root, n + 1);
    this.#mig.sent(r.sessionId, this.#lastSample);
    const last = this.#lastFinish.get(r.sessionId);
    if (last !== undefined) {
      this.#lastFinish.delete(r.sessionId);
      this.#gapSum += Math.max(0, r.at - last);
      this.#gaps++;
    }
    if (r.at < this.#firstSent) this.#firstSent = r.at;
    this.#sent++;
  }

  firstToken (id: string, at: number): void {
    const o = this.#get(id);
    if (o.first < 0) o.first = at;
  }

  requestFinished (id: string, f: FinishedRequest): void {
    const o = this.#get(id);
    this.#open.delete(id);
    const ttft = (o.first < 0 ? f.at : o.first) - o.sent;
    const e2e = f.at - o.sent;
    this.#ttft.record(ttft);
    if (Number.isFinite(o.idealTtft)) this.#ttftExcess.record(Math.max(0, ttft - o.idealTtft));
    this.#ttftRoots.push(o.root);
    this.#ttftValues.push(ttft);
    this.#e2e.record(e2e);
    this.#e2eSum += e2e;
    if (f.engineQueue !== undefined) this.#engineQueue.record(f.engineQueue);
    this.#lastFinish.set(o.sessionId, f.at);
    if (f.outputTokens > 1) this.#tpot.record((e2e - ttft) / (f.outputTokens - 1));
    if (ttft <= this.#slo) this.#good++;
    if (f.engineTtft !== undefined) this.#added.record(ttft - f.engineTtft);
    this.#completed++;
    const prompt = f.promptTokens ?? o.prompt;
    this.#prompt += prompt;
    this.#sentPrompt += o.prompt;
    this.#cached += Math.min(f.cachedTokens, prompt);
    this.#held += o.held;
    this.#recomputed += Math.max(0, o.held - f.cachedTokens);
    this.#boundAll += o.boundAll;
    this.#boundIntra += o.boundIntra;
    this.#output += f.outputTokens;
    if (f.at > this.#lastEnd) this.#lastEnd = f.at;
  }

  requestFailed (id: string, at: number, cause: string): void {
    this.#get(id);
    this.#open.delete(id);
    this.#failed++;
    this.#failures[cause] = (this.#failures[cause] ?? 0) + 1;
    if (at > this.#lastEnd) this.#lastEnd = at;
  }

  /** A session (the root of a tree: with all its sub-agents) has finished. */
  sessionDone (sessionId: string, at: number): void {
    const start = this.#sessionStart.get(sessionId);
    if (start === undefined) throw new Error(`session ${sessionId} done but never sent a request`);
    this.#session.record(at - start);
    this.#sessionTime.set(sessionId, at - start);
    this.#sessionsDone++;
  }

  /** One 100 ms sample: pending prefill tokens per engine, indexed by engine. */
  pendingPrefill (at: number, perEngine: ArrayLike<number>): void {
    if (perEngine.length !== this.#engines) throw new RangeError(`pending prefill sample has ${perEngine.length} engines, want ${this.#engines}`);
    const v = Float64Array.from(perEngine);
    let sum = 0, max = 0;
    for (const x of v) { sum += x; if (x > max) max = x; }
    if (sum > 0) this.#index.push(max / (sum / v.length));
    this.#lastSample = v;
    this.#sumMax += max;
    this.#sumMean += sum / v.length;
    if (this.#samples.length >= this.#samplesKept) { this.#droppedSamples++; return; }
    this.#sampleT.push(at);
    this.#samples.push(v);
  }

  /** A migration attempt; `ok: false` when its transfer failed and the session stayed on its source. */
  migration (m: Migration): void {
    if (this.#mig.record(m) && this.#moves.length < this.#eventsKept) this.#moves.push({ t: m.at, from: m.from, to: m.to });
  }

  #bySessionLength (): MetricsSummary['bySessionLength'] {
    const counts = [...this.#requestsPerRoot.values()].sort((a, b) => a - b);
    const median = counts.length === 0 ? 0 : counts[Math.floor((counts.length - 1) / 2)];
    const isShort = (root: string): boolean => (this.#requestsPerRoot.get(root) ?? 0) <= median;
    const cls = (short: boolean): SessionClassSummary => {
      const ttft = new Latency();
      const completion = new Latency();
      for (let i = 0; i < this.#ttftRoots.length; i++) if (isShort(this.#ttftRoots[i]) === short) ttft.record(this.#ttftValues[i]);
      let sessions = 0;
      for (const [root, t] of this.#sessionTime) {
        if (isShort(root) !== short) continue;
        completion.record(t);
        sessions++;
      }
      return { sessions, ttft: ttft.summary(), completion: completion.summary() };
    };
    return { medianRequests: median, short: cls(true), long: cls(false) };
  }

  /** A request left the gateway's admission queue after `seconds`. */
  admitted (seconds: number): void { this.#wait.record(seconds); }

  /** Time the gateway spent deciding where a request goes, seconds. */
  routingDecision (seconds: number): void { this.#decision.record(seconds); }

  /** `idealMakespan` from amplification.ts and `idealSessionCompletion` (root session id → its completion time)
   *  from the same ideal replay (`replay().sessionCompletion`), with the isolated times the driver measured. */
  summary (opts: { idealMakespan?: number; idealSessionCompletion?: ReadonlyMap<string, number> } = {}): MetricsSummary {
    const makespan = this.#firstSent === Infinity || this.#lastEnd === -Infinity ? 0 : Math.max(0, this.#lastEnd - this.#firstSent);
    const ideal = opts.idealMakespan ?? null;
    const bounded = this.#bound !== null && this.#blocksSeen && this.#sentPrompt > 0;
    const apc = this.#prompt > 0 ? this.#cached / this.#prompt : 0;
    const bound = bounded ? this.#boundAll / this.#sentPrompt : null;
    const failures = { ...this.#failures };
    if (this.#open.size > 0) failures.incomplete = this.#open.size;
    return {
      requests: { sent: this.#sent, completed: this.#completed, failed: this.#failed, incomplete: this.#open.size },
      ttft: this.#ttft.summary(), ttftExcess: this.#ttftExcess.summary(), tpot: this.#tpot.summary(), e2e: this.#e2e.summary(), sessionCompletion: this.#session.summary(),
      ttftCdf: this.#ttft.cdf(),
      recompute: { heldTokens: this.#held, recomputedTokens: this.#recomputed, share: this.#held > 0 ? this.#recomputed / this.#held : null },
      apc: {
        value: apc, bound, intraSessionBound: bounded ? this.#boundIntra / this.#sentPrompt : null,
        ratio: bound !== null && bound > 0 ? apc / bound : null, promptTokens: this.#prompt, cachedTokens: this.#cached,
      },
      hotspot: {
        mean: this.#index.length === 0 ? 0 : this.#index.reduce((a, b) => a + b, 0) / this.#index.length,
        p99: percentile(this.#index, 99), loadWeighted: this.#sumMean > 0 ? this.#sumMax / this.#sumMean : 0,
        samples: this.#samples.length + this.#droppedSamples, loadedSamples: this.#index.length,
      },
      makespan, idealMakespan: ideal, amplification: ideal === null ? null : amplification(makespan, ideal),
      sessionSlowdown: this.#slowdown(opts.idealSessionCompletion),
      throughput: {
        outputTokensPerSec: makespan > 0 ? this.#output / makespan : 0,
        sessionsPerMin: makespan > 0 ? (this.#sessionsDone * 60) / makespan : 0,
        outputTokens: this.#output, sessionsCompleted: this.#sessionsDone,
      },
      goodput: { ttftSlo: this.#slo, share: this.#sent > 0 ? this.#good / this.#sent : 0 },
      migrations: this.#mig.summary(this.#sent),
      coupling: couplingOf({
        meanTurnServiceTime: this.#completed > 0 ? this.#e2eSum / this.#completed : 0,
        sessionArrivalRate: this.#lambda ?? arrivalRate(this.#rootStarts),
        meanTurnsPerSession: this.#turns ?? (this.#rootStarts.length > 0 ? this.#sent / this.#rootStarts.length : null),
        meanToolGap: this.#gapOption ?? (this.#gaps > 0 ? this.#gapSum / this.#gaps : null),
        engines: this.#engines,
      }),
      failures,
      gateway: { decision: this.#decision.summary(), addedLatency: this.#added.summary() },
      timeline: { ...this.#timeline(), migrations: this.#moves.slice(), droppedSamples: this.#droppedSamples },
      bySessionLength: this.#bySessionLength(),
      admissionWait: this.#wait.summary(),
      engineQueue: this.#engineQueue.summary(),
    };
  }

  #slowdown (ideal: ReadonlyMap<string, number> | undefined): MetricsSummary['sessionSlowdown'] {
    const ratios: number[] = [];
    let idealSum = 0;
    if (ideal !== undefined) {
      for (const [id, t] of this.#sessionTime) {
        const i = ideal.get(id);
        if (i !== undefined && i > 0) {
          ratios.push(t / i);
          idealSum += i;
        }
      }
    }
    if (ratios.length === 0) return { mean: null, p90: null, sessions: 0, idealMean: null };
    return { mean: ratios.reduce((a, b) => a + b, 0) / ratios.length, p90: percentile(ratios, 90), sessions: ratios.length, idealMean: idealSum / ratios.length };
  }

  /** Pending prefill per engine over time, at most timelinePoints points (bucket maxima keep the peaks). */
  #timeline (): { t: number[]; pendingPrefill: number[][] } {
    const n = this.#samples.length;
    const per = Math.max(1, Math.ceil(n / this.#timelinePoints));
    const t: number[] = [];
    const pending: number[][] = Array.from({ length: this.#engines }, () => []);
    for (let i = 0; i < n; i += per) {
      t.push(this.#sampleT[i]);
      for (let e = 0; e < this.#engines; e++) {
        let m = 0;
        for (let j = i; j < Math.min(n, i + per); j++) m = Math.max(m, this.#samples[j][e]);
        pending[e].push(m);
      }
    }
    return { t, pendingPrefill: pending };
  }

  #get (id: string): Open {
    const o = this.#open.get(id);
    if (o === undefined) throw new Error(`request ${id} is not in flight (never sent, or already finished)`);
    return o;
  }
}
