// The gateway's RoutingState over the shared tables: the Router (src/core/router.ts) decides and records;
// this file maps backends to pod rows, session ids to keys, and the route pool's block keys into this
// thread's scratch area so longestPrefix reads them in place. Main thread only.
import type { Region } from '../core/region.js';
import { LoadTable } from '../core/load-table.js';
import { PodTable } from '../core/pod-table.js';
import { PrefixIndex } from '../core/prefix-index.js';
import { RingProducer } from '../core/ring.js';
import { SessionTable } from '../core/session-table.js';
import { SessionKeys } from '../core/session-key.js';
import { Router, type RouteRequest, type Routed } from '../core/router.js';
import type { Policy, PodView } from '../core/policy.js';
import { NoCandidateError } from '../core/policy.js';
import type { KeySpan } from '../core/block-keys.js';
import type { Backend } from './backends.js';
import type { Placement, RoutingInput, RoutingState } from './routing-state.js';
import type { Usage } from './stream-observer.js';
import type { EngineLoad } from './engine-metrics.js';

interface TablePlacement extends Placement {
  readonly routed: Routed;
  readonly request: RouteRequest;
  readonly startedAt: number;
  sawFirstToken: boolean;
}

export interface TableRoutingOptions {
  sessionTtlMs: number;
  /** Session expiry: slots examined per routed request, so idle sessions go without a sweep. */
  sessionExpiryBudget?: number;
  /** Called after every backendChanged (health probe, reload), e.g. to tell the kv-events thread which engines to follow. */
  onBackendChanged?: (b: Backend) => void;
}

export class TableRouting implements RoutingState {
  readonly router: Router;
  readonly load: LoadTable;
  readonly sessions: SessionTable;
  readonly pods: PodTable;
  readonly index: PrefixIndex;
  readonly ring: RingProducer;
  readonly #backends: readonly Backend[];
  readonly #keys: SessionKeys;
  readonly #region: Region;
  readonly #keysPtr: number;
  readonly #keysCap: number;
  readonly #expiryBudget: number;
  readonly #onChanged: ((b: Backend) => void) | null;

  constructor (region: Region, backends: readonly Backend[], policy: Policy, opts: TableRoutingOptions) {
    this.#region = region;
    this.#backends = backends;
    const scratch = region.claimScratch();
    // One scratch area, cut in two: session-id bytes first, then block keys.
    const idBytes = 4096;
    this.#keys = new SessionKeys(region, { ptr: scratch.ptr, bytes: idBytes });
    this.#keysPtr = scratch.ptr + idBytes;
    this.#keysCap = Math.floor((scratch.bytes - idBytes) / 8);
    this.load = new LoadTable(region);
    this.sessions = new SessionTable(region);
    this.pods = new PodTable(region);
    this.index = new PrefixIndex(region);
    this.ring = new RingProducer(region);
    this.#expiryBudget = opts.sessionExpiryBudget ?? 8;
    this.#onChanged = opts.onBackendChanged ?? null;
    for (const b of backends) this.backendChanged(b, 0);
    const assumed = this.ring.layout.opcodes.assumed;
    this.router = new Router({ index: this.index, load: this.load, sessions: this.sessions }, policy, {
      sessionTtlMs: opts.sessionTtlMs,
      // The kv-events thread applies these; a full ring drops them and counts it (a missed hint, never an error).
      record: (pod, keys, now) => { this.ring.pushKeysAt(assumed, pod, keys.ptr, keys.count, now); }
    });
  }

  sessionKey (sessionId: string): bigint {
    return this.#keys.key(sessionId);
  }

  /** Puts the block keys where the kernels can read them; a prompt longer than the area is matched on its head. */
  #span (keys: BigUint64Array): KeySpan {
    const n = Math.min(keys.length, this.#keysCap);
    new BigUint64Array(this.#region.memory.buffer, this.#keysPtr, n).set(n === keys.length ? keys : keys.subarray(0, n));
    return { ptr: this.#keysPtr, count: n };
  }

  route (input: RoutingInput, exclude: ReadonlySet<number>, now: number): Placement {
    const candidates: PodView[] = [];
    for (const b of this.#backends) {
      if (b.serves(input.model) && !exclude.has(b.index) && b.config.role !== 'prefill') {
        candidates.push({ index: b.index, id: b.id, role: b.config.role, blockSize: input.blockSize, kvCapacityBlocks: 0 });
      }
    }
    if (candidates.length === 0) throw new NoCandidateError();
    const request: RouteRequest = {
      model: input.model,
      sessionKey: input.sessionId === null ? null : this.sessionKey(input.sessionId),
      parentSessionKey: null,
      promptTokens: input.promptTokens,
      keys: this.#span(input.blockKeys),
      blockSize: input.blockSize,
      expectedOutputTokens: input.maxTokens
    };
    const routed = this.router.route(request, candidates, now, Math.random());
    if (this.#expiryBudget > 0) this.sessions.expire(now, this.#expiryBudget);
    const p: TablePlacement = {
      backend: this.#backends[routed.pod],
      reason: routed.reason,
      expectedPrefill: routed.expectedPrefill,
      decidedAt: now,
      routed,
      request,
      startedAt: now,
      sawFirstToken: false
    };
    return p;
  }

  started (p: Placement, _input: RoutingInput, now: number): void {
    const tp = p as TablePlacement;
    // The keys were written for this request's route() call; nothing else used the area in between (same tick).
    this.router.dispatched(tp.routed, tp.request, now);
  }

  firstToken (p: Placement): void {
    const tp = p as TablePlacement;
    if (tp.sawFirstToken) return;
    tp.sawFirstToken = true;
    this.router.firstToken(tp.routed);
  }

  finished (p: Placement, _input: RoutingInput, usage: Usage | null, _ok: boolean, now: number): void {
    const tp = p as TablePlacement;
    const contextTokens = usage ? usage.promptTokens + usage.completionTokens : null;
    this.router.finished(tp.routed, tp.request, { sawFirstToken: tp.sawFirstToken, contextTokens, serviceMs: now - tp.startedAt }, now);
  }

  session (sessionId: string): Record<string, unknown> | null {
    const s = this.sessions.get(this.sessionKey(sessionId));
    if (!s) return null;
    const host = s.host >= 0 ? this.#backends[s.host]?.id ?? null : null;
    return { host, inFlight: s.inFlight, contextTokens: s.contextTokens, attainedServiceMs: s.attained, migrations: s.migrations, lastActivity: s.lastActivity };
  }

  backendChanged (b: Backend, _now: number): void {
    if (b.index >= this.pods.capacity) throw new RangeError(`backend ${b.id}: more backends than the pod table holds (${this.pods.capacity})`);
    const state = b.draining ? 'draining' : b.health === 'healthy' ? 'ready' : 'down';
    const prev = this.pods.get(b.index);
    this.#onChanged?.(b);
    if (prev && prev.state === state && prev.role === b.config.role) return;
    this.pods.set(b.index, { state, role: b.config.role, blockSize: prev?.blockSize ?? 0, kvBlocks: prev?.kvBlocks ?? 0, model: 0 });
    // A backend that went down or away no longer holds what the index says: forget it (the kv-events thread clears it).
    if (state !== 'ready' && prev?.state === 'ready') this.ring.push(this.ring.layout.opcodes.forgetPod, b.index, 0n, 0n, 0n);
  }

  engineLoad (b: Backend, load: EngineLoad, now: number): void {
    this.load.setEngine(b.index, { running: load.running, waiting: load.waiting, kvUsage: load.kvUsage, time: now });
  }

  tableStats (): Array<{ table: string; entries: number; dropped: number }> {
    const ix = this.index.stats();
    const ss = this.sessions.stats();
    const rs = this.ring.stats();
    return [
      { table: 'prefix_index', entries: ix.size, dropped: ix.evictions },
      { table: 'sessions', entries: ss.count, dropped: ss.evicted },
      { table: 'record_ring', entries: rs.size, dropped: rs.dropped }
    ];
  }
}
