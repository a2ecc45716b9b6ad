// The engine core's scheduler, as vllm/v1/core/sched/scheduler.py schedules:
// - each step first schedules running requests (decode, or the next chunk of a chunked prefill) in the order they
//   were admitted, then the waiting queue, under max_num_batched_tokens tokens and max_num_seqs running requests;
//   a request's chunk is also capped by long_prefill_token_threshold (0: no cap); past a head that cannot get
//   blocks only requests whose pulled/loaded KV has landed are scheduled, and when nothing runs and nothing fits,
//   landed KV is given up (kept cached) so the queue cannot deadlock;
// - the waiting queue is FCFS (`fcfs`, vLLM's default), or under `priority` ordered by (priority, arrival time,
//   request id) as PriorityRequestQueue and Request.__lt__ order it; a waiting request never preempts a running
//   one, whatever its priority;
// - only when a running request cannot get blocks is one preempted (recompute): the most recently admitted under
//   fcfs, the largest (priority, arrival time) under priority (the request itself, possibly); its blocks are
//   freed (their cached hashes stay evictable) and it goes back to the waiting queue (its front under fcfs, its
//   place by key under priority); a step that preempted admits no waiting request;
// - kvImport requests pull the prefix blocks they lack, wait for the transfer, then prefill the rest (§2a); with
//   a shared offload store a new request loads the stored blocks after its local hits instead of prefilling them:
//   it waits for the load, as an import does (vLLM's async connector load, WAITING_FOR_REMOTE_KVS), then those
//   blocks join the prefix cache.
// Blocks come from the KV block manager (kv-block-manager.ts); the engine (engine.ts) runs the step.
import { offloadLoadTime, transferTime } from '../engine-model/figures.js';
import type { ResolvedProfile } from '../engine-model/profile.js';
import { runsBefore, Status, type Req } from './engine-request.js';
import type { KvBlockManager } from './kv-block-manager.js';
import type { OffloadTier } from './offload-store.js';

export class Scheduler {
  readonly #profile: ResolvedProfile;
  readonly #kv: KvBlockManager;
  readonly #store: OffloadTier | null;
  readonly #byPriority: boolean;
  readonly #longPrefillTokenThreshold: number;
  running: Req[] = [];
  waiting: Req[] = [];
  /** True when the last step could schedule nothing and nothing changed since: stepping again is pointless. */
  stalled = false;
  // This step's schedule (reused: no per-step allocation): the requests and the tokens each computes.
  readonly sched: Req[] = [];
  readonly schedNew: number[] = [];
  // Counters since start.
  queries = 0;
  hits = 0;
  promptTokens = 0;
  preemptions = 0;
  importedTokens = 0;
  importedBytes = 0;
  /** Offload-store loads: requests that loaded, tokens and bytes they loaded instead of prefilling. */
  offloadLoads = 0;
  offloadLoadedTokens = 0;
  offloadLoadedBytes = 0;

  constructor (profile: ResolvedProfile, kv: KvBlockManager, store: OffloadTier | null, byPriority: boolean, longPrefillTokenThreshold: number) {
    this.#profile = profile;
    this.#kv = kv;
    this.#store = store;
    this.#byPriority = byPriority;
    this.#longPrefillTokenThreshold = longPrefillTokenThreshold;
  }

  /** Queues a new request: at the tail (fcfs) or at its place by key (priority). */
  add (q: Req): void {
    if (this.#byPriority) this.#insertByPriority(q);
    else this.waiting.push(q);
    this.stalled = false;
  }

  /** Takes a request out of its list (abort); the caller frees its blocks. */
  remove (q: Req): void {
    const list = q.status === Status.Running ? this.running : this.waiting;
    list.splice(list.indexOf(q), 1);
  }

  /**
   * Fills sched/schedNew for a step at `now`: running requests first, then waiting ones. Returns whether it
   * preempted (then no waiting request was admitted).
   */
  schedule (now: number): boolean {
    const sched = this.sched;
    const schedNew = this.schedNew;
    sched.length = 0;
    schedNew.length = 0;
    let budget = this.#profile.maxNumBatchedTokens;
    let preempted = false;

    // 1. Running requests, in admission order (under both policies: priority orders only the waiting queue);
    //    when blocks run out, preempt (fcfs: the tail; priority: the largest (priority, arrival time)).
    for (let i = 0; i < this.running.length && budget > 0; i++) {
      const q = this.running[i];
      const numNew = Math.min(this.#chunk(q.numPrompt + q.out.length - q.numComputed), budget);
      let ok = true;
      while (!this.#kv.allocate(q, numNew, 0)) {
        let victim: Req;
        if (!this.#byPriority) victim = this.running.pop()!;
        else {
          const v = this.#lowestPriorityRunning();
          victim = this.running[v];
          this.running.splice(v, 1);
          // A victim ahead of q was scheduled by this step: vLLM takes its tokens back into the budget.
          if (v < i) {
            budget += this.#unschedule(victim);
            i--;
          }
        }
        this.#preempt(victim);
        preempted = true;
        if (victim === q) { ok = false; break; }
      }
      if (!ok) break;
      sched.push(q);
      schedNew.push(numNew);
      budget -= numNew;
    }

    // 2. Waiting requests in the queue's order (FCFS, or by priority), unless this step preempted. If nothing runs
    //    and nothing could start, the pool is held by KV that landed for waiting requests which cannot fit their
    //    next chunk either: that KV is dropped (it stays cached, evictable) one request at a time, from the queue's
    //    tail (newest, or least urgent), so the queue moves again.
    if (!preempted) {
      budget = this.#scheduleWaiting(now, budget);
      while (sched.length === 0 && this.running.length === 0 && this.#dropLandedKv()) budget = this.#scheduleWaiting(now, budget);
    }
    return preempted;
  }

  /** Pulls that completed by `now`: the blocks are filled, so they enter the prefix cache (→ BlockStored). */
  finishTransfers (now: number): void {
    for (const q of this.waiting) {
      if (q.status !== Status.WaitingForRemoteKvs || q.readyAt > now) continue;
      // The last prompt token is recomputed here, as vLLM does, so the request has something to prefill.
      q.numComputed = q.importTokens === q.numPrompt ? q.importTokens - 1 : q.importTokens;
      this.#kv.cacheFullBlocks(q, q.numComputed);
      // vLLM counts connector-loaded tokens in num_cached_tokens (→ usage cached_tokens); a re-prefill after a
      // preemption keeps the first figure.
      if (q.numCachedTokens < 0) q.numCachedTokens = q.numComputed;
      q.status = Status.Waiting;
      this.stalled = false;
    }
  }

  /** Throws if the waiting queue is out of the priority policy's order (the engine's invariant check). */
  check (): void {
    if (this.#byPriority) {
      for (let i = 1; i < this.waiting.length; i++) if (!runsBefore(this.waiting[i - 1], this.waiting[i])) throw new Error(`waiting queue out of priority order at ${i}`);
    }
  }

  /**
   * Schedules waiting requests in the queue's order (FCFS, or (priority, arrival, id)). Those waiting for a KV pull are skipped; once a request cannot
   * start (no blocks), the scan goes on only for requests whose KV has landed (they already hold their prefix and
   * need one chunk more): stopping there would strand them behind a head that may need their blocks to fit, with
   * nothing running to free any (vLLM's scheduler had this deadlock, vllm-project/vllm#45388, #57841).
   */
  #scheduleWaiting (now: number, budget: number): number {
    const p = this.#profile;
    const sched = this.sched;
    const schedNew = this.schedNew;
    const bs = this.#kv.blockSize;
    let blocked = false;
    for (let w = 0; w < this.waiting.length && budget > 0 && this.running.length < p.maxNumSeqs;) {
      const q = this.waiting[w];
      if (q.status === Status.WaitingForRemoteKvs || (blocked && q.blocks.length === 0)) { w++; continue; }
      let hits = 0;
      const firstLook = q.numComputed === 0 && q.blocks.length === 0;
      if (firstLook) hits = this.#kv.lookup(q);
      if (q.r.kvImport != null && !q.importStarted) {
        const started = this.#startImport(q, hits, now);
        if (started === null) { blocked = true; w++; continue; } // no blocks for the pull: FCFS waits
        if (started) { w++; continue; }
      } else if (firstLook && this.#store !== null) {
        const started = this.#startLoad(q, hits, now);
        if (started === null) { blocked = true; w++; continue; }
        if (started) { w++; continue; }
      }
      const numNew = Math.min(this.#chunk(q.numPrompt + q.out.length - q.numComputed - hits * bs), budget);
      if (!this.#kv.allocate(q, numNew, hits)) { blocked = true; w++; continue; }
      if (firstLook && q.numCachedTokens < 0) {
        this.queries += q.numPrompt;
        this.hits += hits * bs;
      }
      this.waiting.splice(w, 1);
      q.status = Status.Running;
      this.running.push(q);
      if (q.firstScheduled < 0) {
        q.firstScheduled = now;
        this.promptTokens += q.numPrompt;
      }
      if (q.numCachedTokens < 0) q.numCachedTokens = q.numComputed;
      sched.push(q);
      schedNew.push(numNew);
      budget -= numNew;
    }
    return budget;
  }

  /** long_prefill_token_threshold's cap on the tokens one request computes in a step (scheduler.py, both loops). */
  #chunk (numNew: number): number {
    const t = this.#longPrefillTokenThreshold;
    return t > 0 && numNew > t ? t : numNew;
  }

  /**
   * The priority policy's victim: the running request with the largest (priority, arrival time), the first such
   * in admission order on a tie (scheduler.py schedule(): max(self.running, key=(priority, arrival_time))).
   */
  #lowestPriorityRunning (): number {
    const run = this.running;
    let v = 0;
    for (let i = 1; i < run.length; i++) {
      const a = run[i];
      const b = run[v];
      if (a.priority > b.priority || (a.priority === b.priority && a.r.arrivalTime > b.r.arrivalTime)) v = i;
    }
    return v;
  }

  /** Takes a request this step scheduled out of it (it is being preempted); returns the tokens it had. */
  #unschedule (q: Req): number {
    const k = this.sched.indexOf(q);
    const n = this.schedNew[k];
    this.sched.splice(k, 1);
    this.schedNew.splice(k, 1);
    // Its blocks will not be computed by this step: nothing of it goes to the offload store.
    this.#kv.unsave(q);
    return n;
  }

  /** Puts q in the waiting queue at its place by Request.__lt__ (after its equals: none, ids are unique). */
  #insertByPriority (q: Req): void {
    const w = this.waiting;
    let lo = 0;
    let hi = w.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (runsBefore(w[mid], q)) lo = mid + 1;
      else hi = mid;
    }
    w.splice(lo, 0, q);
  }

  /** Frees the landed KV of the last waiting request holding some (a recompute preemption); false if none does. */
  #dropLandedKv (): boolean {
    for (let w = this.waiting.length - 1; w >= 0; w--) {
      const q = this.waiting[w];
      if (q.status !== Status.Waiting || q.blocks.length === 0) continue;
      this.#kv.free(q);
      q.numComputed = 0;
      q.storeBlocks = -1;
      q.prefillTarget = q.numPrompt + q.out.length;
      q.preemptions++;
      this.preemptions++;
      return true;
    }
    return false;
  }

  /**
   * Starts the pull of the prefix blocks this engine lacks. True if the request now waits for the transfer,
   * false if nothing needs pulling (ordinary prefill), null if the blocks for the pull are not free yet.
   */
  #startImport (q: Req, hits: number, now: number): boolean | null {
    const bs = this.#kv.blockSize;
    const src = q.r.kvImport!.prefixTokenIds;
    const lim = Math.min(src.length, q.numPrompt);
    let m = 0;
    while (m < lim && src[m] === q.prompt[m]) m++;
    const remoteBlocks = Math.floor(m / bs);
    if (remoteBlocks <= hits) { q.importStarted = true; return false; }
    // The pull needs blocks for the whole remote prefix: the local hits by reference, fresh ones for the rest.
    const saved = q.numComputed;
    if (!this.#kv.allocateNoCache(q, remoteBlocks, hits)) return null;
    q.numComputed = saved;
    q.importStarted = true;
    q.status = Status.WaitingForRemoteKvs;
    q.importTokens = remoteBlocks * bs;
    const missing = (remoteBlocks - hits) * bs;
    q.readyAt = now + transferTime(this.#profile, missing);
    this.importedTokens += missing;
    this.importedBytes += missing * this.#profile.kvBytesPerToken;
    this.queries += q.numPrompt;
    this.hits += hits * bs;
    return true;
  }

  /**
   * Starts loading the blocks the offload store holds beyond the local hits. True if the request now waits for
   * the load, false if the store adds nothing (ordinary prefill), null if the blocks to load into are not free.
   */
  #startLoad (q: Req, hits: number, now: number): boolean | null {
    const bs = this.#kv.blockSize;
    // As for local hits, at least one token is left to compute. The answer is kept while the request waits
    // for blocks, so a stalled queue does not ask the store at every step.
    if (q.storeBlocks < 0) q.storeBlocks = this.#store!.lookup(q.digests, Math.floor((q.numPrompt + q.out.length - 1) / bs), now);
    const stored = q.storeBlocks;
    if (stored <= hits) return false;
    if (!this.#kv.allocateNoCache(q, stored, hits)) return null;
    q.status = Status.WaitingForRemoteKvs;
    q.importTokens = stored * bs;
    const missing = (stored - hits) * bs;
    q.readyAt = now + offloadLoadTime(this.#profile, missing);
    this.offloadLoads++;
    this.offloadLoadedTokens += missing;
    this.offloadLoadedBytes += missing * this.#profile.kvBytesPerToken;
    if (q.numCachedTokens < 0) {
      this.queries += q.numPrompt;
      this.hits += hits * bs;
    }
    return true;
  }

  #preempt (q: Req): void {
    this.#kv.free(q);
    q.numComputed = 0;
    q.storeBlocks = -1;
    q.prefillTarget = q.numPrompt + q.out.length;
    q.status = Status.Waiting;
    q.preemptions++;
    this.preemptions++;
    // _preempt_request: prepend_request, which a priority queue turns into an insertion by key.
    if (this.#byPriority) this.#insertByPriority(q);
    else this.waiting.unshift(q);
  }
}
