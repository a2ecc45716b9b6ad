// A data-plane thread's side of owner-protocol.ts: what its pipeline and door ask of the main thread, the owner
// of every decision (docs/architecture.md#n-data-plane-threads), as the same interfaces the main thread's own
// pipeline calls directly: `Placements` (admission, routing and the bookkeeping of each attempt), the client gate's
// answer with its limits, the response origins. Calls that return a decision return a promise of the owner's
// answer; the bookkeeping (started, first token, finished) is a message that waits for nothing. The thread keeps a
// copy of the backend list, each with its own upstream pool, as the owner tells it.
import type { MessagePort } from 'node:worker_threads';
import { Backend } from '../fleet/backends.js';
import type { GatewayConfig } from '../config/index.js';
import { LoadTable } from '../core/load-table.js';
import type { Region } from '../core/region.js';
import type { AdmissionRank } from '../core/engine-priority.js';
import { NoCandidateError } from '../core/policy.js';
import { QueueFullError, type DropReason } from '../core/admission-control.js';
import { EarError, type ErrorCode } from '../errors/errors.js';
import { ANONYMOUS, RateLimitRefusal, type AdmittedClient, type ClientLimits, type GatedRoute } from '../request/client-gate.js';
import { rateLimitHeaders, type RateLimitState, type RateLimitStyle } from '../request/rate-limit-headers.js';
import type { GatewayWaiter, Placement, Placements, Queued, Retain, RoutingInput } from '../fleet/routing-port.js';
import type { Usage } from '../upstream/stream-observer.js';
import type { ResponseOrigin, SharedSession, StoreReply } from '../store/session-store.js';
import type { LocalFigures } from '../store/shared-sessions.js';
import { BatchedPort } from '../threads/batched-port.js';
import type { KeyRingWriter, KeysAt } from './key-ring.js';
import { copyKeys } from '../core/block-keys.js';
import {
  ANSWER_RELEASED, RELEASED_FIELDS, SUBMIT_RECORD, RELEASED_MIGRATING, RELEASED_PROMOTED, RELEASED_QUEUED, RELEASED_RANK, REPORT_FINISHED, REPORT_FIRST_TOKEN,
  REPORT_STARTED, type BackendWire, type ErrorWire, type InputWire, type LimitsWire, type PlacementWire, type ToOwner, type ToOwnerItem,
  type ToThread, type ToThreadItem
} from './owner-protocol.js';

/** A placement the owner made: `pid` names it in the bookkeeping messages. */
class RemotePlacement implements Placement {
  readonly pid: number;
  readonly reason: string;
  readonly expectedPrefill: number;
  readonly matchedBlocks?: number;
  readonly decidedAt: number;
  /** Set when this thread starts it (a retry's), as the owner's dispatch time is set: the same time. */
  dispatchedAt?: number;
  readonly migrating?: boolean;
  readonly rank?: AdmissionRank;
  constructor (w: Omit<PlacementWire, 'index' | 'backendId' | 'transferFrom'>, readonly backend: Backend, readonly transferFrom: Backend | null) {
    this.pid = w.pid;
    this.reason = w.reason;
    this.expectedPrefill = w.expectedPrefill;
    this.matchedBlocks = w.matchedBlocks;
    this.decidedAt = w.decidedAt;
    this.dispatchedAt = w.dispatchedAt;
    this.migrating = w.migrating;
    this.rank = w.rank;
  }
}

/** A submit the owner has not answered yet. */
class RemoteQueued implements Queued {
  readonly queued = true as const;
  cancelled = false;
  constructor (readonly id: number, readonly waiter: GatewayWaiter) {}
}

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
}

/** The error the owner answered, as the thread's own class (instanceof checks in the pipeline hold). */
function errorOf (e: ErrorWire, limits: (w: LimitsWire) => ClientLimits): Error {
  if (e.queueFull === true) return new QueueFullError(e.retryAfterSeconds ?? 1);
  if (e.noCandidate === true) {
    const err = new NoCandidateError(undefined, e.filter ?? null);
    err.message = e.message;
    return err;
  }
  if (e.limits !== undefined) return new RateLimitRefusal(e.message, e.retryAfterSeconds ?? 1, limits(e.limits));
  return new EarError(e.code as ErrorCode, e.message, { retryAfterSeconds: e.retryAfterSeconds ?? undefined });
}

export class OwnerClient implements Placements {
  /** The thread's copy of the backend list: the pipeline's live list. */
  readonly backends: Backend[] = [];
  readonly #out: BatchedPort<ToOwnerItem>;
  readonly #config: Readonly<GatewayConfig>;
  readonly #pending = new Map<number, Pending>();
  readonly #submits = new Map<number, RemoteQueued>();
  #nextId = 1;
  /** The owner said its gate admits everyone as it is (false until it says so: ask). */
  #gateOpen = false;

  readonly #load: LoadTable;
  readonly #keys: KeyRingWriter | null;
  readonly #onGone: (id: string) => void;

  /**
   * `keys`: the thread's key ring (null: block keys travel in the messages). `onGone`: a backend id left the list
   * (the owner's fleet let it go), so the thread drops its series as the owner does its own.
   */
  constructor (port: MessagePort, config: Readonly<GatewayConfig>, region: Region, keys: KeyRingWriter | null = null, onGone: (id: string) => void = () => {}) {
    this.#out = new BatchedPort<ToOwnerItem>(port);
    this.#keys = keys;
    this.#config = config;
    this.#load = new LoadTable(region);
    this.#onGone = onGone;
  }

  /** Every message to the owner goes here, in order: one batch per turn of the thread's loop. */
  post (m: ToOwner): void {
    this.#out.post(m);
  }

  /** Sends what waits for the end of the turn now (before the thread exits). */
  flush (): void {
    this.#out.flush();
  }

  #call<T> (make: (id: number) => ToOwner): Promise<T> {
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.post(make(id));
    });
  }

  /** An owner's message that is not the thread's own business (drain, stop, metrics): false. */
  receive (m: ToThread): boolean {
    switch (m.t) {
      case 'backends':
        this.#setBackends(m.list);
        return true;
      case 'gateOpen':
        this.#gateOpen = m.open;
        return true;
      case 'answer': {
        const w = this.#pending.get(m.id);
        if (w === undefined) {
          // A submit's refusal (429 queue full, no backend: what submit throws on the owner) answers its id.
          const q = this.#submits.get(m.id);
          this.#submits.delete(m.id);
          if (q !== undefined && !q.cancelled && !m.ok) {
            q.cancelled = true;
            q.waiter.refused?.(errorOf(m.error, (l) => this.#limits(l)));
          }
          return true;
        }
        this.#pending.delete(m.id);
        if (m.ok) w.resolve(m.value);
        else w.reject(errorOf(m.error, (l) => this.#limits(l)));
        return true;
      }
      case 'dropped': {
        const q = this.#submits.get(m.id);
        this.#submits.delete(m.id);
        if (q !== undefined && !q.cancelled) q.waiter.dropped(m.reason as DropReason, performance.timeOrigin + performance.now());
        return true;
      }
      default:
        return false;
    }
  }

  /** The owner's batch: its messages, and its releases as records of numbers (owner-protocol.ts). Others: `other`. */
  receiveBatch (batch: readonly ToThreadItem[], other: (m: ToThread) => void): void {
    for (let i = 0; i < batch.length; i++) {
      const m = batch[i];
      if (typeof m === 'object') {
        if (!this.receive(m)) other(m);
        continue;
      }
      const code = m as number;
      if (code % 4 !== ANSWER_RELEASED) throw new Error(`the owner sent an unknown record ${code}`);
      this.#released((code - ANSWER_RELEASED) / 4, batch, i + 1);
      i += RELEASED_FIELDS;
    }
  }

  /** A submit's release: the record's fields from `batch[at]` on. */
  #released (id: number, batch: readonly ToThreadItem[], at: number): void {
    const pid = batch[at] as number;
    const q = this.#submits.get(id);
    this.#submits.delete(id);
    // The client left while the answer was on its way: the placement is undone, never sent.
    if (q === undefined || q.cancelled) {
      this.#finished(pid, performance.timeOrigin + performance.now(), null, false);
      return;
    }
    const index = batch[at + 1] as number;
    const matched = batch[at + 3] as number;
    const dispatched = batch[at + 5] as number;
    const from = batch[at + 6] as number;
    const flags = batch[at + 7] as number;
    const b = this.backends.find((x) => x.index === index);
    // The list is sent before any placement that names a new backend (one port, in order): never missing.
    if (b === undefined) throw new Error(`the owner placed a request on row ${index}, which this thread does not know`);
    const p = new RemotePlacement({
      pid, expectedPrefill: batch[at + 2] as number, matchedBlocks: matched < 0 ? undefined : matched, decidedAt: batch[at + 4] as number,
      dispatchedAt: dispatched < 0 ? undefined : dispatched, migrating: (flags & RELEASED_MIGRATING) !== 0 ? true : undefined,
      rank: (flags & RELEASED_RANK) !== 0 ? { classRank: batch[at + 10] as number, order: batch[at + 11] as number } : undefined,
      reason: batch[at + 12] as string
    }, b, from < 0 ? null : this.backends.find((x) => x.index === from) ?? null);
    q.waiter.released(p, { now: 0, waitMs: batch[at + 8] as number, level: batch[at + 9] as number, promoted: (flags & RELEASED_PROMOTED) !== 0, queued: (flags & RELEASED_QUEUED) !== 0 });
  }

  // Placements: admission and routing are the owner's; what happens to an attempt is told to it.

  submit (input: RoutingInput, waiter: GatewayWaiter, _now: number, priorityClass: number): Placement | Queued {
    const id = this.#nextId++;
    const q = new RemoteQueued(id, waiter);
    // Answered by a release or a drop, or refused by an answer to the same id ('answer' above).
    this.#submits.set(id, q);
    const at = this.#putKeys(input.blockKeys);
    // A record of numbers and strings (owner-protocol.ts) unless the keys or the excluded backends must travel as objects.
    if (at !== null && input.exclude === undefined) {
      this.#out.postRecord([
        id * 4 + SUBMIT_RECORD, input.model, input.sessionId, input.parentSessionId, input.promptTokens, input.maxTokens, input.user,
        at.at, at.n, input.expectedOutputTokens ?? null, input.deadlineAt ?? null, priorityClass
      ]);
    } else this.post({ t: 'submit', id, input: this.#inputWire(input, at), priorityClass });
    return q;
  }

  cancel (q: Queued): boolean {
    const r = q as RemoteQueued;
    if (r.cancelled || !this.#submits.has(r.id)) return false;
    r.cancelled = true;
    this.#submits.delete(r.id);
    // Released meanwhile, the owner's answer finds no submit here and the placement is undone (#released).
    this.post({ t: 'cancel', id: r.id });
    return true;
  }

  route (input: RoutingInput, exclude: ReadonlySet<number>, _now: number, attempt = 0): Promise<Placement> {
    return this.#call<PlacementWire>((id) => ({ t: 'route', id, input: this.#inputWire(input, this.#putKeys(input.blockKeys)), exclude: [...exclude], attempt })).then((w) => this.#placement(w));
  }

  /** From the thread's copy of the backends: whether a retry would find one (the owner's filters decide it). */
  hasCandidate (model: string, exclude: ReadonlySet<number>): boolean {
    return this.backends.some((b) => !exclude.has(b.index) && b.serves(model));
  }

  started (p: Placement, _input: RoutingInput, now: number): void {
    const r = p as RemotePlacement;
    r.dispatchedAt = now;
    this.#out.postRecord([r.pid * 4 + REPORT_STARTED, now]);
  }

  firstToken (p: Placement): void {
    this.#out.post((p as RemotePlacement).pid * 4 + REPORT_FIRST_TOKEN);
  }

  finished (p: Placement, _input: RoutingInput, usage: Usage | null, ok: boolean, now: number, retain?: Retain): void {
    const pid = (p as RemotePlacement).pid;
    if (retain !== undefined) this.post({ t: 'finished', pid, at: now, usage: usage === null ? null : { ...usage }, ok, retain });
    else this.#finished(pid, now, usage, ok);
  }

  /** A finished report as numbers (owner-protocol.ts). */
  #finished (pid: number, at: number, usage: Usage | null, ok: boolean): void {
    this.#out.postRecord([pid * 4 + REPORT_FINISHED, at, ok ? 1 : 0, usage?.promptTokens ?? -1, usage?.completionTokens ?? -1, usage?.cachedTokens ?? -1]);
  }

  migrationEnded (p: Placement, ok: boolean): Promise<Placement | null> {
    return this.#call<PlacementWire | null>((id) => ({ t: 'migrationEnded', id, pid: (p as RemotePlacement).pid, ok })).then((w) => w === null ? null : this.#placement(w));
  }

  /** Read lock-free from the load table in the shared memory (its writer is the owner). */
  pendingPrefill (b: Backend): number {
    return this.#load.pendingPrefill(b.index);
  }

  /** The engine's queue at its last scrape, read lock-free from the load table (the owner scrapes and writes it). */
  engineQueue (b: Backend): { running: number; waiting: number } {
    return { running: this.#load.running(b.index), waiting: this.#load.waiting(b.index) };
  }

  // The gate, the token charge, the response origins: the owner's too.

  /** The client at the owner's gate; rejects with its refusal (401, 429), whose limits `limited` hears too. */
  admitClient (route: GatedRoute, auth: string, address: () => string, limited: (l: ClientLimits) => void): AdmittedClient | Promise<AdmittedClient> {
    // An open gate's answer is known (anonymous, unlimited): no round trip. A reload that closes it reaches this
    // thread in the owner's next batch, as a request on the main thread admitted just before a reload passes too.
    if (this.#gateOpen) return ANONYMOUS;
    return this.#call<{ user: string | null; limits: LimitsWire | null }>((id) => ({ t: 'gate', id, route, auth, address: address() })).then(
      (v) => {
        const limits = v.limits === null ? null : this.#limits(v.limits);
        if (limits !== null) limited(limits);
        return { user: v.user, limits };
      },
      (err: unknown) => {
        if (err instanceof RateLimitRefusal) limited(err.limits);
        throw err;
      });
  }

  #limits (w: LimitsWire): ClientLimits {
    return new RemoteLimits(this, w);
  }

  charge (lid: number, cost: number): Promise<{ refused: RateLimitRefusal | null; state: RateLimitState | null }> {
    return this.#call<{ refused: ErrorWire | null; state: RateLimitState | null }>((id) => ({ t: 'charge', id, lid, cost })).then((v) => ({
      refused: v.refused === null ? null : errorOf(v.refused, (l) => this.#limits(l)) as RateLimitRefusal,
      state: v.state
    }));
  }

  /** What ResponseOrigins asks of a store: the owner's (its memory store or Redis). */
  readonly origins = {
    getResponseOrigin: (responseId: string): Promise<StoreReply<ResponseOrigin | null>> =>
      this.#call<StoreReply<ResponseOrigin | null>>((id) => ({ t: 'originGet', id, responseId })),
    setResponseOrigin: (responseId: string, origin: ResponseOrigin, ttlSeconds: number): Promise<StoreReply<boolean>> => {
      this.post({ t: 'originSet', responseId, origin, ttlSeconds });
      return Promise.resolve({ ok: true, value: true });
    }
  };

  // The session table, for a shared store's turns (owner-sessions.ts): its writer is the owner.

  /** Merges a shared record into the owner's table; applied before any decision this thread asks for after it. */
  adoptShared (sessionId: string, session: SharedSession): void {
    this.post({ t: 'adopt', sessionId, session });
  }

  /** The session's figures in the owner's table once it applied what this thread sent before; undefined if absent. */
  sessionFigures (sessionId: string): Promise<LocalFigures | undefined> {
    return this.#call<LocalFigures | null>((id) => ({ t: 'sessionFigures', id, sessionId })).then((v) => v ?? undefined);
  }

  /**
   * The keys may be a view of the thread's scratch area, which its next request reuses: copied into the key ring
   * (the owner copies them out on arrival); null when the ring has no room (or the thread none): then they go in
   * the message.
   */
  #putKeys (keys: BigUint64Array): KeysAt | null {
    return this.#keys?.put(keys) ?? null;
  }

  /** `at`: where #putKeys put the request's keys (null: they go in the message). */
  #inputWire (i: RoutingInput, at: KeysAt | null): InputWire {
    const w: InputWire = {
      model: i.model, sessionId: i.sessionId, parentSessionId: i.parentSessionId, promptTokens: i.promptTokens,
      maxTokens: i.maxTokens, user: i.user
    };
    if (at === null) w.blockKeys = copyKeys(i.blockKeys);
    else if (at.n > 0) {
      w.keysAt = at.at;
      w.keysN = at.n;
    }
    if (i.expectedOutputTokens !== undefined) w.expectedOutputTokens = i.expectedOutputTokens;
    if (i.deadlineAt !== undefined) w.deadlineAt = i.deadlineAt;
    if (i.exclude !== undefined) w.exclude = [...i.exclude];
    return w;
  }

  #placement (w: PlacementWire): RemotePlacement {
    const b = this.backends.find((x) => x.index === w.index && x.id === w.backendId);
    // The list is sent before any placement that names a new backend (one port, in order): never missing.
    if (b === undefined) throw new Error(`the owner placed a request on ${w.backendId} (row ${w.index}), which this thread does not know`);
    const from = w.transferFrom === null ? null : this.backends.find((x) => x.index === w.transferFrom) ?? null;
    return new RemotePlacement(w, b, from);
  }

  /** The owner's list: a known backend is updated in place (its pool kept); a new one gets a pool; a gone one closes its own. */
  #setBackends (list: readonly BackendWire[]): void {
    const next: Backend[] = [];
    for (const w of list) {
      let b = this.backends.find((x) => x.index === w.index && x.id === w.config.id && x.config.url === w.config.url);
      if (b === undefined) b = new Backend(w.index, w.config, this.#config);
      b.health = w.health;
      b.draining = w.draining;
      b.models = new Set(w.models);
      b.maxModelLen = new Map(w.maxModelLen);
      next.push(b);
    }
    for (const b of this.backends) {
      if (next.includes(b)) continue;
      b.gone = true;
      void b.pool.close().catch(() => {});
      // Unless a backend of the same id (a changed URL or row) took its place, as the owner's fleet decides it.
      if (!next.some((x) => x.id === b.id)) this.#onGone(b.id);
    }
    this.backends.splice(0, this.backends.length, ...next);
  }
}

/** A client's limits on a data-plane thread: the buckets are the owner's; headers from what it last said of them. */
class RemoteLimits implements ClientLimits {
  readonly limitsTokens: boolean;
  #state: RateLimitState;
  #open = false;
  constructor (readonly owner: OwnerClient, readonly w: LimitsWire) {
    this.limitsTokens = w.limitsTokens;
    this.#state = w.state;
  }

  chargeTokens (cost: number): Promise<RateLimitRefusal | null> | null {
    if (!this.limitsTokens || this.#open) return null;
    this.#open = true;
    return this.owner.charge(this.w.lid, cost).then((r) => {
      if (r.state !== null) this.#state = r.state;
      if (r.refused !== null) this.#open = false;
      return r.refused;
    });
  }

  settleTokens (used: number | null): void {
    if (!this.limitsTokens) return;
    this.owner.post(this.#open ? { t: 'settle', lid: this.w.lid, used } : { t: 'forget', lid: this.w.lid });
    this.#open = false;
  }

  state (): RateLimitState {
    return this.#state;
  }

  headers (style: RateLimitStyle, wallNow: number): Array<[string, string]> {
    return rateLimitHeaders(this.#state, style, wallNow);
  }
}
