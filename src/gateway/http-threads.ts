// The owner's side of the data-plane threads (httpThreads ≥ 2; docs/architecture.md#n-data-plane-threads): the
// main thread starts N worker threads that each listen on the gateway's port, and answers their messages
// (owner-protocol.ts) against the process core it alone holds: the gate, admission and routing, the bookkeeping of
// every attempt, the token charges, the response origins, a shared store's records into the session table. It
// pushes them the backend list each time it changes, drains them with the core, sums their metrics into one scrape,
// and starts again a thread that died.
import { Worker } from 'node:worker_threads';
import { createServer } from 'node:net';
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from 'prom-client';

type MetricJson = MetricObjectWithValues<MetricValue<string>>;
import type pino from 'pino';
import { NoCandidateError } from '../core/policy.js';
import { QueueFullError } from '../core/admission-control.js';
import { EarError } from '../errors/errors.js';
import { RateLimitRefusal, type ClientLimits } from '../request/client-gate.js';
import { reportFault } from '../request/faults.js';
import type { SharedRegion } from '../core/region.js';
import type { Placement, Queued, Retain, RoutingInput } from '../fleet/routing-port.js';
import type { Usage } from '../upstream/stream-observer.js';
import type { ProcessCore } from './core.js';
import { BatchedPort } from '../threads/batched-port.js';
import { Region } from '../core/region.js';
import { KeyRingReader } from './key-ring.js';
import { freezeTokenizer } from '../tokenize/index.js';
import { requestThreadLimits } from '../threads/young-generation.js';
import {
  ANSWER_RELEASED, FINISHED_FIELDS, SUBMIT_FIELDS, SUBMIT_RECORD, RELEASED_MIGRATING, RELEASED_PROMOTED, RELEASED_QUEUED, RELEASED_RANK, REPORT_FINISHED, REPORT_FIRST_TOKEN,
  REPORT_STARTED, STARTED_FIELDS, type BackendWire, type ErrorWire, type HttpThreadData, type InputWire, type PlacementWire, type ToOwner, type ToOwnerItem,
  type ToThread, type ToThreadItem
} from './owner-protocol.js';

const ENTRY = new URL('./http-thread.js', import.meta.url);
/** A data-plane thread's young generation: the production one unless the process's flags size it (young-generation.ts). */
const REQUEST_LIMITS = requestThreadLimits();

/** Limits kept per thread for a charge's correction; past it the oldest go (a request refused at its door after the gate never settles). */
const LIMITS_BOUND = 1 << 16;
/** Times one thread is started again after it died; then it stays down (a crash loop is a bug to fix, not to spin on). */
export const MAX_RESTARTS = 3;

/**
 * Route threads of data-plane thread `index` (1…threads): the process's `routeThreads` dealt out, the first
 * `routeThreads % threads` taking one more, and at least one each; so all of them hold max(routeThreads, threads).
 */
export function routeThreadsOf (index: number, routeThreads: number, threads: number): number {
  return Math.max(1, Math.floor(routeThreads / threads) + (index <= routeThreads % threads ? 1 : 0));
}
/** How long a thread may take to exit once told to stop before it is terminated. */
const STOP_TIMEOUT_MS = 5000;
/** How long a thread's shared store client may take to connect before the thread listens (it runs degraded past it). */
const STORE_WAIT_MS = 1000;

export interface HttpThreadsOptions {
  core: ProcessCore;
  shared: SharedRegion;
  /** The owner's loopback listener (listenHttp with `forwarded`), where threads hand the routes they do not serve. */
  ownerPort: number;
  /** Threads (≥ 2). */
  threads: number;
  log: Pick<pino.Logger, 'info' | 'warn' | 'error'>;
  /**
   * The data-plane thread's module (default http-thread.js). bench/owner-ceiling.ts puts a load generator that
   * speaks owner-protocol.ts in its place, to measure this owner at saturation.
   */
  entry?: URL;
}

interface Held {
  p: Placement;
  input: RoutingInput;
}

class ThreadState {
  worker!: Worker;
  /** The owner's messages to it: one batch per turn of the main thread's loop. */
  out!: BatchedPort<ToThreadItem>;
  /** Its key ring (null: it sends block keys in its messages). */
  keys: KeyRingReader | null = null;
  readonly placements = new Map<number, Held>();
  readonly queued = new Map<number, Queued>();
  readonly limits = new Map<number, ClientLimits>();
  readonly metrics = new Map<number, (json: MetricJson[]) => void>();
  nextPid = 1;
  nextLid = 1;
  restarts = 0;
  alive = false;
  drained: (() => void) | null = null;
  constructor (readonly index: number) {}
}

export class HttpThreads {
  readonly #o: HttpThreadsOptions;
  /** The main thread's view of the shared region (the threads' key rings). */
  readonly #region: Region;
  readonly #threads: ThreadState[] = [];
  #port = 0;
  #lastList = '';
  #gateOpen: boolean | null = null;
  #nextMetrics = 1;
  #stopping = false;

  constructor (o: HttpThreadsOptions) {
    this.#o = o;
    this.#region = new Region(o.shared);
  }

  /** The port every thread listens on. */
  get port (): number {
    return this.#port;
  }

  /** Threads serving now. */
  get alive (): number {
    return this.#threads.filter((t) => t.alive).length;
  }

  /** Starts the threads; resolves with the port once every thread listens on it. */
  async start (): Promise<number> {
    const { core, threads } = this.#o;
    // uWS shares a port between listeners (SO_REUSEPORT) only when it is named: port 0 becomes a free one first.
    this.#port = core.config.port === 0 ? await freePort(core.config.host) : core.config.port;
    for (let i = 0; i < threads; i++) this.#threads.push(new ThreadState(i + 1));
    // The first alone (it proves the port can be taken), the rest together.
    this.#port = await this.#spawn(this.#threads[0]);
    await Promise.all(this.#threads.slice(1).map((t) => this.#spawn(t)));
    core.onDrain(() => {
      for (const t of this.#threads) {
        if (!t.alive) continue;
        core.track(new Promise<void>((resolve) => { t.drained = resolve; }));
        this.#post(t, { t: 'drain' });
      }
    });
    return this.#port;
  }

  #spawn (t: ThreadState): Promise<number> {
    const { core, shared, ownerPort, threads } = this.#o;
    const data: HttpThreadData = {
      thread: t.index, config: core.config, shared, port: this.#port, ownerPort,
      routeThreads: routeThreadsOf(t.index, core.config.routeThreads, threads),
      frozenTokenizer: freezeTokenizer(core.config.tokenizer),
      // The thread's own store client waits for the store only if the main thread's reached it.
      storeWaitMs: core.sessions !== null && core.sessions.store.stats().state === 'up' ? STORE_WAIT_MS : 0
    };
    const w = t.worker = new Worker(this.#o.entry ?? ENTRY, { workerData: data, resourceLimits: REQUEST_LIMITS });
    t.out = new BatchedPort<ToThreadItem>(w);
    return new Promise<number>((resolve, reject) => {
      let listening = false;
      const one = (m: ToOwner): void => {
        if (m.t === 'listening') {
          listening = true;
          t.alive = true;
          t.keys = m.keyRing === null ? null : new KeyRingReader(this.#region, m.keyRing);
          this.#post(t, { t: 'backends', list: this.#wireList() });
          this.#post(t, { t: 'gateOpen', open: this.#o.core.gate.open });
          resolve(m.port);
          return;
        }
        try {
          this.#handle(t, m);
        } catch (err) {
          // A question is always answered: its request would wait for ever.
          if ('id' in m && m.t !== 'cancel' && m.t !== 'metrics') this.#post(t, { t: 'answer', id: m.id, ok: false, error: this.#errorWire(t, err) });
          else reportFault(err, 'http-thread');
        }
      };
      // A thread's messages come in batches (threads/batched-port.ts), each in the order it sent them.
      w.on('message', (batch: ToOwnerItem[]) => {
        for (let i = 0; i < batch.length; i++) {
          const m = batch[i];
          if (typeof m !== 'number') one(m as ToOwner);
          else if (m % 4 === SUBMIT_RECORD) {
            this.#submitRecord(t, m / 4, batch, i + 1);
            i += SUBMIT_FIELDS;
          } else if (m % 4 === REPORT_STARTED) {
            const at = batch[i + 1] as number;
            i += STARTED_FIELDS;
            this.#report(t, m, at);
          } else if (m % 4 !== REPORT_FINISHED) this.#report(t, m, 0);
          else {
            const at = batch[i + 1] as number;
            const ok = batch[i + 2] as number;
            const prompt = batch[i + 3] as number;
            const completion = batch[i + 4] as number;
            const cached = batch[i + 5] as number;
            i += FINISHED_FIELDS;
            this.#report(t, m, at, prompt < 0 ? null : { promptTokens: prompt, completionTokens: completion, cachedTokens: cached < 0 ? null : cached }, ok === 1);
          }
        }
      });
      // Without a listener an error in the thread would be thrown here; 'exit' follows it.
      w.on('error', (err) => this.#o.log.error({ err, thread: t.index }, 'a data-plane thread threw'));
      w.once('exit', (code) => {
        t.alive = false;
        this.#orphaned(t);
        if (!listening) {
          reject(new Error(`data-plane thread ${t.index} exited (${code}) before it listened`));
          return;
        }
        if (this.#stopping) return;
        if (t.restarts >= MAX_RESTARTS) {
          this.#o.log.error({ thread: t.index, code, restarts: t.restarts }, 'a data-plane thread died again: it stays down, the others serve on');
          return;
        }
        t.restarts++;
        this.#o.log.error({ thread: t.index, code, restart: t.restarts }, 'a data-plane thread died: its requests end, and it starts again');
        this.#spawn(t).catch((err) => this.#o.log.error({ err, thread: t.index }, 'a data-plane thread could not start again'));
      });
    });
  }

  /** A thread's requests end with it: what it had placed is finished unserved, what waited leaves the queue. */
  #orphaned (t: ThreadState): void {
    const { state, fleet } = this.#o.core;
    const now = this.#o.core.now();
    for (const q of t.queued.values()) state.cancel(q);
    t.queued.clear();
    for (const h of t.placements.values()) {
      state.finished(h.p, h.input, null, false, now);
      fleet.release(h.p.backend);
    }
    t.placements.clear();
    t.limits.clear();
    for (const answer of t.metrics.values()) answer([]);
    t.metrics.clear();
    t.drained?.();
    t.drained = null;
  }

  #post (t: ThreadState, m: ToThread): void {
    if (t.alive) t.out.post(m);
  }

  /** Tells every thread the backend list as it is now, if it changed since last told (health, reloads, row releases). */
  backends (): void {
    if (this.#threads.length === 0) return;
    const list = this.#wireList();
    const key = JSON.stringify(list);
    if (key === this.#lastList) return;
    this.#lastList = key;
    for (const t of this.#threads) this.#post(t, { t: 'backends', list });
  }

  /** Tells every thread whether the gate is open now, if that changed (a SIGHUP's keys and limits). */
  gate (): void {
    const open = this.#o.core.gate.open;
    if (open === this.#gateOpen) return;
    this.#gateOpen = open;
    for (const t of this.#threads) this.#post(t, { t: 'gateOpen', open });
  }

  #wireList (): BackendWire[] {
    return this.#o.core.backends.filter((b) => !b.gone).map((b) => ({
      index: b.index, config: b.config, health: b.health, draining: b.draining, models: [...b.models],
      maxModelLen: [...b.maxModelLen]
    }));
  }

  /** Every thread's metrics (as JSON), for one scrape that sums them with the owner's own. */
  async metricsText (): Promise<string> {
    const { metrics } = this.#o.core;
    const parts: MetricJson[][] = [await metrics.registry.getMetricsAsJSON()];
    parts.push(...await Promise.all(this.#threads.filter((t) => t.alive).map((t) => new Promise<MetricJson[]>((resolve) => {
      const id = this.#nextMetrics++;
      t.metrics.set(id, resolve);
      this.#post(t, { t: 'metrics', id });
    }))));
    return AggregatorRegistry.aggregate(parts.filter((p) => p.length > 0)).metrics();
  }

  /** Stops every thread (after the core drained): each closes its listener and ends. */
  async stop (): Promise<void> {
    this.#stopping = true;
    await Promise.all(this.#threads.map(async (t) => {
      // One starting again (not yet listening) would listen after the stop: it ends here, before it serves.
      if (!t.alive) {
        await t.worker?.terminate();
        return;
      }
      const exited = new Promise<void>((resolve) => t.worker.once('exit', () => resolve()));
      this.#post(t, { t: 'stop' });
      const timer = setTimeout(() => { void t.worker.terminate(); }, STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    }));
  }

  /**
   * A report that came as numbers (owner-protocol.ts); `at`, a started or finished report's time on the thread (a
   * first token's is the owner's, now). A fault in it is reported, as the object message's is.
   */
  #report (t: ThreadState, code: number, at: number, usage: Usage | null = null, ok = false): void {
    const kind = code % 4;
    const pid = (code - kind) / 4;
    try {
      if (kind === REPORT_STARTED) this.#started(t, pid, at);
      else if (kind === REPORT_FIRST_TOKEN) this.#firstToken(t, pid);
      else if (kind === REPORT_FINISHED) this.#finished(t, pid, usage, ok, at);
      else reportFault(new Error(`unknown report ${code}`), 'http-thread');
    } catch (err) {
      reportFault(err, 'http-thread');
    }
  }

  #started (t: ThreadState, pid: number, at: number): void {
    const h = t.placements.get(pid);
    if (h !== undefined) this.#o.core.state.started(h.p, h.input, at);
  }

  #firstToken (t: ThreadState, pid: number): void {
    const h = t.placements.get(pid);
    if (h !== undefined) this.#o.core.state.firstToken(h.p, this.#o.core.now());
  }

  /** At `at`, the thread's time: the attempt's service is counted as the thread (and a shared store) saw it. */
  #finished (t: ThreadState, pid: number, usage: Usage | null, ok: boolean, at: number, retain?: Retain): void {
    const h = t.placements.get(pid);
    if (h === undefined) return;
    t.placements.delete(pid);
    const core = this.#o.core;
    core.state.finished(h.p, h.input, usage, ok, at, retain);
    core.fleet.release(h.p.backend);
  }

  #handle (t: ThreadState, m: ToOwner): void {
    const core = this.#o.core;
    const { state, fleet } = core;
    switch (m.t) {
      case 'gate': {
        const answer = core.gate.admit(m.route, m.auth, () => m.address);
        if (answer instanceof EarError) {
          this.#post(t, { t: 'answer', id: m.id, ok: false, error: this.#errorWire(t, answer) });
          return;
        }
        this.#post(t, { t: 'answer', id: m.id, ok: true, value: { user: answer.user, limits: answer.limits === null ? null : this.#keepLimits(t, answer.limits) } });
        return;
      }
      case 'submit':
        this.#submit(t, m.id, inputOf(t, m.input), m.priorityClass);
        return;
      case 'cancel': {
        const q = t.queued.get(m.id);
        if (q === undefined) return;
        t.queued.delete(m.id);
        state.cancel(q);
        return;
      }
      case 'route': {
        const input = inputOf(t, m.input);
        try {
          const p = state.route(input, new Set(m.exclude), core.now(), m.attempt);
          this.#post(t, { t: 'answer', id: m.id, ok: true, value: this.#hold(t, p, input) });
        } catch (err) {
          this.#post(t, { t: 'answer', id: m.id, ok: false, error: this.#errorWire(t, err) });
        }
        return;
      }
      case 'started':
        this.#started(t, m.pid, core.now());
        return;
      case 'firstToken':
        this.#firstToken(t, m.pid);
        return;
      case 'finished':
        this.#finished(t, m.pid, m.usage, m.ok, m.at, m.retain);
        return;
      case 'migrationEnded': {
        const h = t.placements.get(m.pid);
        const back = h === undefined ? null : state.migrationEnded?.(h.p, m.ok, core.now()) ?? null;
        let value: PlacementWire | null = null;
        if (h !== undefined && back !== null) {
          // The host undid the placement on the target; the request goes back to its source under a new one.
          t.placements.delete(m.pid);
          fleet.release(h.p.backend);
          value = this.#hold(t, back, h.input);
        }
        this.#post(t, { t: 'answer', id: m.id, ok: true, value });
        return;
      }
      case 'charge': {
        const l = t.limits.get(m.lid);
        const refused = l === undefined ? null : l.chargeTokens(m.cost) as RateLimitRefusal | null;
        this.#post(t, { t: 'answer', id: m.id, ok: true, value: { refused: refused === null ? null : this.#errorWire(t, refused), state: l?.state() ?? null } });
        return;
      }
      case 'settle': {
        const l = t.limits.get(m.lid);
        t.limits.delete(m.lid);
        l?.settleTokens(m.used);
        return;
      }
      case 'forget':
        t.limits.delete(m.lid);
        return;
      case 'originGet': {
        const id = m.id;
        core.contexts.store.getResponseOrigin(m.responseId).then(
          (value) => this.#post(t, { t: 'answer', id, ok: true, value }),
          (err) => this.#post(t, { t: 'answer', id, ok: false, error: this.#errorWire(t, err) }));
        return;
      }
      case 'originSet':
        core.contexts.store.setResponseOrigin(m.responseId, m.origin, m.ttlSeconds).catch(() => {});
        return;
      case 'sessionCompleted':
        core.pipeline.onSessionCompleted?.(m.sessionId, m.model, m.path, Buffer.from(m.body.buffer, m.body.byteOffset, m.body.byteLength));
        return;
      case 'adopt':
        core.sessions?.adopt(m.sessionId, m.session);
        return;
      case 'sessionFigures': {
        const f = core.sessions?.local.figures(m.sessionId);
        this.#post(t, { t: 'answer', id: m.id, ok: true, value: f === undefined || f instanceof Promise ? null : f });
        return;
      }
      case 'metrics': {
        const answer = t.metrics.get(m.id);
        t.metrics.delete(m.id);
        answer?.(m.json as MetricJson[]);
        return;
      }
      case 'drained':
        t.drained?.();
        t.drained = null;
        return;
      case 'listening':
        return;
    }
  }

  /** The placement kept for the thread (and its backend held, as a request of the owner's own holds it) until it finishes. */
  #hold (t: ThreadState, p: Placement, input: RoutingInput): PlacementWire {
    const pid = t.nextPid++;
    t.placements.set(pid, { p, input });
    this.#o.core.fleet.hold(p.backend);
    return {
      pid, index: p.backend.index, backendId: p.backend.id, reason: p.reason, expectedPrefill: p.expectedPrefill, matchedBlocks: p.matchedBlocks,
      decidedAt: p.decidedAt, dispatchedAt: p.dispatchedAt, transferFrom: p.transferFrom?.index ?? null, migrating: p.migrating, rank: p.rank
    };
  }

  /** A thread's request submitted for admission: released now (or later, from the queue) by a record, refused by an answer. */
  #submit (t: ThreadState, id: number, input: RoutingInput, priorityClass: number): void {
    const core = this.#o.core;
    let heard = false;
    let r;
    try {
      r = core.state.submit(input, {
        released: (p, info) => {
          heard = true;
          t.queued.delete(id);
          this.#released(t, id, p, input, true, info.waitMs, info.level, info.promoted);
        },
        dropped: (reason) => {
          heard = true;
          t.queued.delete(id);
          this.#post(t, { t: 'dropped', id, reason });
        }
      }, core.now(), priorityClass);
    } catch (err) {
      this.#post(t, { t: 'answer', id, ok: false, error: this.#errorWire(t, err) });
      return;
    }
    if ('queued' in r) {
      // Released inside submit already: the waiter told the thread, nothing waits.
      if (!heard) t.queued.set(id, r);
      return;
    }
    this.#released(t, id, r, input, false, 0, 0, false);
  }

  /** A submit that came as a record (owner-protocol.ts): its fields from `batch[at]` on. */
  #submitRecord (t: ThreadState, id: number, batch: readonly ToOwnerItem[], at: number): void {
    const keysN = batch[at + 7] as number;
    const input: RoutingInput = {
      model: batch[at] as string, sessionId: batch[at + 1] as string | null, parentSessionId: batch[at + 2] as string | null,
      promptTokens: batch[at + 3] as number, maxTokens: batch[at + 4] as number | null, user: batch[at + 5] as string | null,
      blockKeys: keysN === 0 || t.keys === null ? NO_KEYS : t.keys.take({ at: batch[at + 6] as number, n: keysN })
    };
    const expected = batch[at + 8] as number | null;
    const deadline = batch[at + 9] as number | null;
    if (expected !== null) input.expectedOutputTokens = expected;
    if (deadline !== null) input.deadlineAt = deadline;
    try {
      this.#submit(t, id, input, batch[at + 10] as number);
    } catch (err) {
      // A question is always answered: its request would wait for ever.
      this.#post(t, { t: 'answer', id, ok: false, error: this.#errorWire(t, err) });
    }
  }

  /** A submitted request's placement, held for the thread and told it as a record of numbers (owner-protocol.ts). */
  #released (t: ThreadState, id: number, p: Placement, input: RoutingInput, queued: boolean, waitMs: number, level: number, promoted: boolean): void {
    const core = this.#o.core;
    if (!t.alive) {
      // The thread died with the request (its loop's last messages): the placement is undone, never sent.
      core.state.finished(p, input, null, false, core.now());
      return;
    }
    const pid = t.nextPid++;
    t.placements.set(pid, { p, input });
    core.fleet.hold(p.backend);
    const { rank } = p;
    const flags = (queued ? RELEASED_QUEUED : 0) | (p.migrating === true ? RELEASED_MIGRATING : 0) | (promoted ? RELEASED_PROMOTED : 0) | (rank !== undefined ? RELEASED_RANK : 0);
    t.out.postRecord([
      id * 4 + ANSWER_RELEASED, pid, p.backend.index, p.expectedPrefill, p.matchedBlocks ?? -1, p.decidedAt, p.dispatchedAt ?? -1,
      p.transferFrom?.index ?? -1, flags, waitMs, level, rank?.classRank ?? 0, rank?.order ?? 0, p.reason
    ]);
  }

  #keepLimits (t: ThreadState, l: ClientLimits): { lid: number; limitsTokens: boolean; state: ReturnType<ClientLimits['state']> } {
    let lid = 0;
    // Only a token-limited client's are asked for again (its charge and correction); the rest travel as a snapshot.
    if (l.limitsTokens) {
      lid = t.nextLid++;
      t.limits.set(lid, l);
      if (t.limits.size > LIMITS_BOUND) t.limits.delete(t.limits.keys().next().value as number);
    }
    return { lid, limitsTokens: l.limitsTokens, state: l.state() };
  }

  #errorWire (t: ThreadState, err: unknown): ErrorWire {
    if (err instanceof QueueFullError) return { code: err.code, message: err.message, retryAfterSeconds: err.retryAfterSeconds, queueFull: true };
    if (err instanceof NoCandidateError) return { code: err.code, message: err.message, noCandidate: true, filter: err.filter };
    if (err instanceof RateLimitRefusal) return { code: err.code, message: err.message, retryAfterSeconds: err.retryAfterSeconds, limits: { lid: 0, limitsTokens: err.limits.limitsTokens, state: err.limits.state() } };
    if (err instanceof EarError) return { code: err.code, message: err.message, retryAfterSeconds: err.retryAfterSeconds };
    reportFault(err, 'http-thread');
    return { code: 'EAR_ERR_INTERNAL', message: 'internal error' };
  }
}

const NO_KEYS = new BigUint64Array(0);

/** The request as routing takes it; its keys copied out of the thread's key ring now (which frees their slots). */
function inputOf (t: ThreadState, w: InputWire): RoutingInput {
  const { keysN } = w;
  // Field by field (measured: a rest/spread copy of the message was a tenth of the owner's handling of a submit).
  const input: RoutingInput = {
    model: w.model, sessionId: w.sessionId, parentSessionId: w.parentSessionId, promptTokens: w.promptTokens,
    blockKeys: w.blockKeys ?? (keysN === undefined || keysN === 0 || t.keys === null ? NO_KEYS : t.keys.take({ at: w.keysAt!, n: keysN })),
    maxTokens: w.maxTokens, user: w.user
  };
  if (w.expectedOutputTokens !== undefined) input.expectedOutputTokens = w.expectedOutputTokens;
  if (w.deadlineAt !== undefined) input.deadlineAt = w.deadlineAt;
  if (w.exclude !== undefined) input.exclude = new Set(w.exclude);
  return input;
}

/** A port free on `host` now (the kernel's pick for port 0, let go at once). */
function freePort (host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, host, () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a !== null ? a.port : 0));
    });
  });
}
