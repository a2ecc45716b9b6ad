// The simulator's engine core: vLLM v1-like continuous batching over paged, prefix-cached KV blocks.
// No I/O, no timers, no clock: a host calls step(now), waits `duration` (real or virtual), then delivers the
// step's outputs and KV events. Behaviour follows vllm/v1/core/sched/scheduler.py:
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
// - full blocks are hashed and cached as their tokens are scheduled, prompt and generated alike (→ BlockStored);
// - kvExport requests stop after one token and hold their blocks for an importer (kv-transfer.md §2b);
//   kvImport requests pull the prefix blocks they lack, wait for the transfer, then prefill the rest (§2a);
// - with a shared offload store (§3, §6b), every block a step computes is saved to it at the step's end, and a new
//   request loads the stored blocks after its local hits instead of prefilling them: it waits for the load, as an
//   import does (vLLM's async connector load, WAITING_FOR_REMOTE_KVS), then those blocks join the prefix cache.
import type { EngineStats, FinishReason, RequestOutput, SimRequest, StepResult, TokenIds } from './engine-types.js';
import type { BlockStored } from '../kvevents/types.js';
import { BlockHasher, blockExtraKeys, type BlockDigest } from './block-hash.js';
import { BlockPool } from './block-pool.js';
import type { OffloadTier } from './offload-store.js';
import { offloadLoadTime, stepTime, transferTime } from '../engine-model/figures.js';
import { resolveProfile, type EngineProfile, type ResolvedProfile } from '../engine-model/profile.js';
import { DEFAULT_VOCABULARY, generationSeed, nextRandom, validateVocabulary } from './token-generator.js';
import { EarError } from '../errors/errors.js';

export interface SimEngineOptions {
  profile: EngineProfile;
  /** PYTHONHASHSEED-like seed of NONE_HASH (a string, as vLLM hashes it). Default "0". */
  hashSeed?: string;
  /** Overrides the profile's KV capacity (tests, sensitivity sweeps). */
  numGpuBlocks?: number;
  /** Words the generator draws from, each a token-id sequence. Default DEFAULT_VOCABULARY. */
  vocabulary?: readonly (readonly number[])[];
  /** Chance per word of emitting the first stop token instead (once minTokens are out, never with ignoreEos). Default 0. */
  stopProbability?: number;
  /** Seconds an export holds its blocks without a release (VLLM_NIXL_ABORT_REQUEST_TIMEOUT). Default 480. */
  holdTimeout?: number;
  /** Bound of the waiting queue; addRequest throws EngineFullError beyond it. Default 65536. */
  maxWaiting?: number;
  /** A shared offload store (LMCache remote backend, Mooncake store): computed blocks are saved, stored ones loaded. */
  offloadStore?: OffloadTier | null;
  /** vLLM --scheduling-policy. Default 'fcfs'. */
  schedulingPolicy?: SchedulingPolicy;
  /** vLLM --long-prefill-token-threshold: most tokens one request computes in a step; 0 (default) = no cap. */
  longPrefillTokenThreshold?: number;
}

/** vLLM's scheduling policies (SchedulerConfig.policy). */
export const SCHEDULING_POLICIES = ['fcfs', 'priority'] as const;
export type SchedulingPolicy = typeof SCHEDULING_POLICIES[number];

/** vLLM's bounds on a request's priority: pydantic int64 (protocol.py `ge=-(2**63), le=2**63 - 1`). */
export const PRIORITY_MIN = -(2 ** 63);
export const PRIORITY_MAX = 2 ** 63 - 1;

export class EngineFullError extends EarError {
  constructor (message: string) {
    super('EAR_ERR_ENGINE_QUEUE_FULL', message);
    this.name = 'EngineFullError';
  }
}

/** The prompt, with the tokens it may generate, does not fit max_model_len: vLLM's 400, with its message. */
export class ContextLengthError extends EarError {
  constructor (message: string) {
    super('EAR_ERR_CONTEXT_LENGTH', message);
    this.name = 'ContextLengthError';
  }
}

/** The prompt, with the tokens it may generate, needs more KV blocks than the engine has (a cache smaller than
 *  max_model_len, as a KV pool sweep makes). */
export class KvCapacityError extends EarError {
  constructor (message: string) {
    super('EAR_ERR_KV_CAPACITY', message);
    this.name = 'KvCapacityError';
  }
}

/**
 * vLLM's context-length checks on a prompt of `promptLen` tokens, with its messages: the prompt alone over
 * max_model_len (or filling it when max_tokens is not given), then prompt + max_tokens over it. null when it fits.
 */
export function contextLengthError (maxModelLen: number, promptLen: number, maxTokens: number | null): ContextLengthError | null {
  if (promptLen > maxModelLen || (maxTokens === null && promptLen >= maxModelLen)) {
    return new ContextLengthError(`This model's maximum context length is ${maxModelLen} tokens. However, your request has ${promptLen} input tokens. ` +
      'Please reduce the length of the input messages.');
  }
  if (maxTokens !== null && promptLen + maxTokens > maxModelLen) {
    return new ContextLengthError(`'max_tokens' or 'max_completion_tokens' is too large: ${maxTokens}. This model's maximum context length is ${maxModelLen} ` +
      `tokens and your request has ${promptLen} input tokens (${maxTokens} > ${maxModelLen} - ${promptLen}).`);
  }
  return null;
}

const enum Status { Waiting, WaitingForRemoteKvs, Running }

interface Req {
  r: SimRequest;
  /** The host's prompt array, kept by reference (hosts must not mutate it; copying 30k-token prompts costs). */
  prompt: TokenIds;
  /** Generated tokens. */
  out: number[];
  numPrompt: number;
  maxTokens: number;
  stop: Set<number>;
  status: Status;
  numComputed: number;
  blocks: number[];
  /** Leading blocks of `blocks` already through the cache (hit, stored, or refused as duplicates). */
  numCachedBlocks: number;
  digests: BlockDigest[];
  extraLora: string[] | null;
  /** Token count the current (re)prefill must reach: the prompt, or prompt + output after a preemption. */
  prefillTarget: number;
  numCachedTokens: number;
  numOutput: number;
  rng: number;
  word: readonly number[] | null;
  wordPos: number;
  importStarted: boolean;
  /** Leading blocks the offload store holds for this prompt; -1 until asked (again after a preemption). */
  storeBlocks: number;
  importTokens: number;
  readyAt: number;
  firstScheduled: number;
  firstToken: number;
  preemptions: number;
  /** The request's priority (0 when not given); read only under the priority policy. */
  priority: number;
}

/** Request.__lt__: (priority, arrival time, request id), the smaller first. */
function runsBefore (a: Req, b: Req): boolean {
  if (a.priority !== b.priority) return a.priority < b.priority;
  if (a.r.arrivalTime !== b.r.arrivalTime) return a.r.arrivalTime < b.r.arrivalTime;
  return a.r.id < b.r.id;
}

interface Held { blocks: number[]; tokens: number[]; expiry: number }

export class SimEngine {
  readonly profile: ResolvedProfile;
  readonly blockSize: number;
  readonly hasher: BlockHasher;
  readonly pool: BlockPool;
  readonly #vocab: readonly (readonly number[])[];
  readonly #stopProbability: number;
  readonly #holdTimeout: number;
  readonly #maxWaiting: number;
  readonly #store: OffloadTier | null;
  readonly schedulingPolicy: SchedulingPolicy;
  readonly #byPriority: boolean;
  readonly longPrefillTokenThreshold: number;
  /** Digests of the blocks this step computes, saved to the store with the step's end time. */
  #toSave: BlockDigest[] = [];
  readonly #reqs = new Map<string, Req>();
  #running: Req[] = [];
  #waiting: Req[] = [];
  /** Insertion order = expiry order (one timeout for all). */
  readonly #held = new Map<string, Held>();
  /** True when the last step could schedule nothing and nothing changed since: stepping again is pointless. */
  #stalled = false;
  // Scratch arrays for one step (reused: no per-step allocation besides outputs).
  #sched: Req[] = [];
  #schedNew: number[] = [];
  #prefNew: number[] = [];
  #prefPast: number[] = [];
  #hitBlocks: number[] = [];
  // Counters since start.
  #queries = 0;
  #hits = 0;
  #promptTokens = 0;
  #generationTokens = 0;
  #preemptions = 0;
  expiredHolds = 0;
  importedTokens = 0;
  importedBytes = 0;
  /** Offload-store loads: requests that loaded, tokens and bytes they loaded instead of prefilling. */
  offloadLoads = 0;
  offloadLoadedTokens = 0;
  offloadLoadedBytes = 0;
  /** Blocks handed to the offload store (write-through of every computed block). */
  offloadSavedBlocks = 0;

  constructor (opts: SimEngineOptions) {
    this.profile = resolveProfile(opts.profile, { numGpuBlocks: opts.numGpuBlocks });
    this.blockSize = this.profile.blockSize;
    this.hasher = new BlockHasher(this.blockSize, opts.hashSeed ?? '0');
    this.pool = new BlockPool(this.profile.numGpuBlocks);
    this.#vocab = opts.vocabulary ?? DEFAULT_VOCABULARY;
    validateVocabulary(this.#vocab);
    this.#stopProbability = opts.stopProbability ?? 0;
    if (!(this.#stopProbability >= 0 && this.#stopProbability <= 1)) throw new RangeError('stopProbability must be in [0, 1]');
    this.#holdTimeout = opts.holdTimeout ?? 480;
    if (!(this.#holdTimeout > 0)) throw new RangeError('holdTimeout must be > 0 seconds');
    this.#maxWaiting = opts.maxWaiting ?? 65536;
    if (!(Number.isInteger(this.#maxWaiting) && this.#maxWaiting > 0)) throw new RangeError('maxWaiting must be a positive integer');
    this.#store = opts.offloadStore ?? null;
    this.schedulingPolicy = opts.schedulingPolicy ?? 'fcfs';
    if (!SCHEDULING_POLICIES.includes(this.schedulingPolicy)) throw new RangeError(`schedulingPolicy must be one of ${SCHEDULING_POLICIES.join(', ')}, got ${JSON.stringify(this.schedulingPolicy)}`);
    this.#byPriority = this.schedulingPolicy === 'priority';
    this.longPrefillTokenThreshold = opts.longPrefillTokenThreshold ?? 0;
    if (!(Number.isSafeInteger(this.longPrefillTokenThreshold) && this.longPrefillTokenThreshold >= 0)) {
      throw new RangeError(`longPrefillTokenThreshold must be an integer >= 0, got ${this.longPrefillTokenThreshold}`);
    }
  }

  /**
   * Queues a request. Throws RangeError on invalid input, ContextLengthError over max_model_len, KvCapacityError
   * beyond the KV cache (both 400s, src/errors/errors.ts) and EngineFullError when the waiting queue is full
   * (preempted requests return to the queue beyond that bound: at most max_num_seqs more). The engine keeps
   * `promptTokenIds` by reference until the request ends: the host must not mutate it.
   */
  addRequest (r: SimRequest): void {
    const bs = this.blockSize;
    if (typeof r.id !== 'string' || r.id.length === 0) throw new RangeError('request id must be a non-empty string');
    if (this.#reqs.has(r.id) || this.#held.has(r.id)) throw new RangeError(`request id ${JSON.stringify(r.id)} is already in use`);
    const n = r.promptTokenIds.length;
    if (n === 0) throw new RangeError('the prompt must hold at least one token');
    for (let i = 0; i < n; i++) {
      const t = r.promptTokenIds[i];
      if (!Number.isSafeInteger(t) || t < 0) throw new RangeError(`prompt token ${i} is not a non-negative integer: ${t}`);
    }
    if (!Number.isInteger(r.maxTokens) || r.maxTokens < 1) throw new RangeError(`maxTokens must be an integer ≥ 1, got ${r.maxTokens}`);
    if (!Number.isInteger(r.minTokens) || r.minTokens < 0) throw new RangeError(`minTokens must be an integer ≥ 0, got ${r.minTokens}`);
    if (!Array.isArray(r.stopTokenIds)) throw new RangeError('stopTokenIds must be an array of token ids');
    if (r.kvImport != null && (!Array.isArray(r.kvImport.prefixTokenIds) || typeof r.kvImport.sourceEngineId !== 'string')) {
      throw new RangeError('kvImport needs prefixTokenIds (an array of token ids) and sourceEngineId (a string)');
    }
    if (r.kvImport != null && r.kvExport === true) throw new RangeError('a request cannot both export and import KV');
    const priority = r.priority ?? 0;
    if (!Number.isInteger(priority) || priority < PRIORITY_MIN || priority > PRIORITY_MAX) throw new RangeError(`priority must be an integer in int64's range, got ${priority}`);
    const maxTokens = r.kvExport === true ? 1 : r.maxTokens;
    const tooLong = contextLengthError(this.profile.maxModelLen, n, maxTokens);
    if (tooLong !== null) throw tooLong;
    if (Math.ceil((n + maxTokens) / bs) > this.pool.numBlocks) throw new KvCapacityError(`prompt (${n}) + max tokens (${maxTokens}) exceed the KV cache (${this.pool.numBlocks * bs} tokens)`);
    if (this.#waiting.length >= this.#maxWaiting) throw new EngineFullError(`waiting queue is full (${this.#maxWaiting} requests)`);
    const digests: BlockDigest[] = [];
    if (r.blockHashes !== undefined) {
      const m = Math.min(r.blockHashes.length, Math.floor(n / bs));
      for (let i = 0; i < m; i++) {
        const d = r.blockHashes[i];
        if (!(d instanceof Uint8Array) || d.length !== 32) throw new RangeError(`blockHashes[${i}] must be a 32-byte digest`);
        digests.push(Buffer.isBuffer(d) ? d : Buffer.from(d.buffer, d.byteOffset, 32));
      }
    }
    const q: Req = {
      r,
      prompt: r.promptTokenIds,
      out: [],
      numPrompt: n,
      maxTokens,
      stop: new Set(r.stopTokenIds),
      status: Status.Waiting,
      numComputed: 0,
      blocks: [],
      numCachedBlocks: 0,
      digests,
      extraLora: r.loraName === null ? null : [r.loraName],
      prefillTarget: n,
      numCachedTokens: -1,
      numOutput: 0,
      rng: generationSeed(r.seed, r.promptTokenIds),
      word: null,
      wordPos: 0,
      importStarted: false,
      storeBlocks: -1,
      importTokens: 0,
      readyAt: 0,
      firstScheduled: -1,
      firstToken: -1,
      preemptions: 0,
      priority
    };
    this.#reqs.set(r.id, q);
    if (this.#byPriority) this.#insertByPriority(q);
    else this.#waiting.push(q);
    this.#stalled = false;
  }

  /** Drops a request wherever it is and frees its blocks (or its held blocks). False if unknown. */
  abortRequest (id: string): boolean {
    if (this.releaseHeld(id)) return true;
    const q = this.#reqs.get(id);
    if (q === undefined) return false;
    this.#reqs.delete(id);
    const list = q.status === Status.Running ? this.#running : this.#waiting;
    list.splice(list.indexOf(q), 1);
    this.#freeBlocks(q);
    this.#stalled = false;
    return true;
  }

  /** Frees an export's held blocks (the importer read them). False if nothing is held under that id. */
  releaseHeld (id: string): boolean {
    const h = this.#held.get(id);
    if (h === undefined) return false;
    this.#held.delete(id);
    this.pool.free(h.blocks.reverse());
    this.#stalled = false;
    return true;
  }

  /** Token ids of the full blocks an export holds (what an importer pulls), or null if none is held. */
  heldBlocks (id: string): number[] | null {
    return this.#held.get(id)?.tokens ?? null;
  }

  /** Frees holds whose timeout passed by `now` (also done at every step). */
  expireHolds (now: number): void {
    for (const [id, h] of this.#held) {
      if (h.expiry > now) break;
      this.releaseHeld(id);
      this.expiredHolds++;
    }
  }

  /** vLLM's /reset_prefix_cache: drops every cached hash (→ AllBlocksCleared); false while any block is in use. */
  resetPrefixCache (): boolean {
    return this.pool.reset();
  }

  /** KV events raised outside a step (reset, release, abort); a step returns its own with the rest. */
  takeKvEvents (): StepResult['kvEvents'] {
    return this.pool.takeEvents();
  }

  /**
   * When the host should call step() next: `now` if there is work, a later time if the only work waits on a
   * transfer, null when idle (until addRequest, abortRequest or releaseHeld).
   */
  nextStepTime (now: number): number | null {
    if (this.#running.length > 0) return now;
    let t = Infinity;
    let stalled = false;
    for (const q of this.#waiting) {
      if (q.status === Status.WaitingForRemoteKvs) t = Math.min(t, q.readyAt);
      else if (!this.#stalled) return now;
      else stalled = true;
    }
    // A request stalled on blocks can be unblocked by a hold expiring.
    if (stalled) for (const h of this.#held.values()) { t = Math.min(t, h.expiry); break; }
    return t === Infinity ? null : Math.max(t, now);
  }

  hasRequest (id: string): boolean { return this.#reqs.has(id); }

  stats (): EngineStats {
    let pending = 0;
    for (const q of this.#running) pending += Math.max(0, q.prefillTarget - q.numComputed);
    for (const q of this.#waiting) pending += Math.max(0, q.prefillTarget - q.numComputed);
    return {
      running: this.#running.length,
      waiting: this.#waiting.length,
      kvUsage: this.pool.numUsed / this.pool.numBlocks,
      pendingPrefillTokens: pending,
      numGpuBlocks: this.pool.numBlocks,
      blockSize: this.blockSize,
      prefixCacheQueries: this.#queries,
      prefixCacheHits: this.#hits,
      promptTokens: this.#promptTokens,
      generationTokens: this.#generationTokens,
      preemptions: this.#preemptions
    };
  }

  /** Runs one scheduler step at host time `now`. Outputs are to be delivered at now + duration. */
  step (now: number): StepResult {
    this.expireHolds(now);
    this.#finishTransfers(now);
    const p = this.profile;
    const sched = this.#sched;
    const schedNew = this.#schedNew;
    sched.length = 0;
    schedNew.length = 0;
    let budget = p.maxNumBatchedTokens;
    let preempted = false;

    // 1. Running requests, in admission order (under both policies: priority orders only the waiting queue);
    //    when blocks run out, preempt (fcfs: the tail; priority: the largest (priority, arrival time)).
    for (let i = 0; i < this.#running.length && budget > 0; i++) {
      const q = this.#running[i];
      const numNew = Math.min(this.#chunk(q.numPrompt + q.out.length - q.numComputed), budget);
      let ok = true;
      while (!this.#allocate(q, numNew, 0)) {
        let victim: Req;
        if (!this.#byPriority) victim = this.#running.pop()!;
        else {
          const v = this.#lowestPriorityRunning();
          victim = this.#running[v];
          this.#running.splice(v, 1);
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
      while (sched.length === 0 && this.#running.length === 0 && this.#dropLandedKv()) budget = this.#scheduleWaiting(now, budget);
    }

    // 3. The step's duration, from what it computes.
    let numPrefill = 0;
    let numDecode = 0;
    let decodeContext = 0;
    for (let i = 0; i < sched.length; i++) {
      const q = sched[i];
      const n = schedNew[i];
      if (n === 1 && q.numComputed >= q.prefillTarget) { numDecode++; decodeContext += q.numComputed + 1; } else {
        this.#prefNew[numPrefill] = n;
        this.#prefPast[numPrefill++] = q.numComputed;
      }
    }
    const duration = sched.length === 0 ? 0 : stepTime(p.step, this.#prefNew, this.#prefPast, numPrefill, numDecode, decodeContext);
    // A step that only preempted freed blocks and left the waiting queue for the next step: not a stall.
    this.#stalled = sched.length === 0 && !preempted;
    const end = now + duration;
    if (this.#toSave.length > 0) {
      // Saved during the forward pass (LMCache's save_kv_layer): off the critical path, visible once computed.
      this.offloadSavedBlocks += this.#toSave.length;
      this.#store!.save(this.#toSave, end);
      this.#toSave = [];
    }

    // 4. Advance: computed tokens, sampled tokens, stop conditions.
    const outputs: RequestOutput[] = [];
    for (let i = 0; i < sched.length; i++) {
      const q = sched[i];
      q.numComputed += schedNew[i];
      if (q.numComputed < q.numPrompt + q.out.length) {
        outputs.push({ id: q.r.id, newTokenIds: [], numCachedTokens: q.numCachedTokens, finished: null, stopReason: null });
        continue;
      }
      const t = this.#sample(q);
      q.out.push(t);
      q.numOutput++;
      this.#generationTokens++;
      if (q.firstToken < 0) q.firstToken = end;
      let finished: FinishReason | null = null;
      let stopReason: number | null = null;
      if (q.numOutput >= q.r.minTokens && q.stop.has(t)) { finished = 'stop'; stopReason = t; } else if (q.numOutput >= q.maxTokens || q.numPrompt + q.out.length >= p.maxModelLen) finished = 'length';
      const out: RequestOutput = { id: q.r.id, newTokenIds: [t], numCachedTokens: q.numCachedTokens, finished, stopReason };
      if (finished !== null) this.#finish(q, out, end);
      outputs.push(out);
    }
    return { duration, outputs, kvEvents: this.pool.takeEvents() };
  }

  /**
   * Schedules waiting requests in the queue's order (FCFS, or (priority, arrival, id)). Those waiting for a KV pull are skipped; once a request cannot
   * start (no blocks), the scan goes on only for requests whose KV has landed (they already hold their prefix and
   * need one chunk more): stopping there would strand them behind a head that may need their blocks to fit, with
   * nothing running to free any (vLLM's scheduler had this deadlock, vllm-project/vllm#45388, #57841).
   */
  #scheduleWaiting (now: number, budget: number): number {
    const p = this.profile;
    const sched = this.#sched;
    const schedNew = this.#schedNew;
    let blocked = false;
    for (let w = 0; w < this.#waiting.length && budget > 0 && this.#running.length < p.maxNumSeqs;) {
      const q = this.#waiting[w];
      if (q.status === Status.WaitingForRemoteKvs || (blocked && q.blocks.length === 0)) { w++; continue; }
      let hits = 0;
      const firstLook = q.numComputed === 0 && q.blocks.length === 0;
      if (firstLook) hits = this.#lookup(q);
      if (q.r.kvImport != null && !q.importStarted) {
        const started = this.#startImport(q, hits, now);
        if (started === null) { blocked = true; w++; continue; } // no blocks for the pull: FCFS waits
        if (started) { w++; continue; }
      } else if (firstLook && this.#store !== null) {
        const started = this.#startLoad(q, hits, now);
        if (started === null) { blocked = true; w++; continue; }
        if (started) { w++; continue; }
      }
      const numNew = Math.min(this.#chunk(q.numPrompt + q.out.length - q.numComputed - hits * this.blockSize), budget);
      if (!this.#allocate(q, numNew, hits)) { blocked = true; w++; continue; }
      if (firstLook && q.numCachedTokens < 0) {
        this.#queries += q.numPrompt;
        this.#hits += hits * this.blockSize;
      }
      this.#waiting.splice(w, 1);
      q.status = Status.Running;
      this.#running.push(q);
      if (q.firstScheduled < 0) {
        q.firstScheduled = now;
        this.#promptTokens += q.numPrompt;
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
    const t = this.longPrefillTokenThreshold;
    return t > 0 && numNew > t ? t : numNew;
  }

  /**
   * The priority policy's victim: the running request with the largest (priority, arrival time), the first such
   * in admission order on a tie (scheduler.py schedule(): max(self.running, key=(priority, arrival_time))).
   */
  #lowestPriorityRunning (): number {
    const run = this.#running;
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
    const k = this.#sched.indexOf(q);
    const n = this.#schedNew[k];
    this.#sched.splice(k, 1);
    this.#schedNew.splice(k, 1);
    // Its blocks will not be computed by this step: nothing of it goes to the offload store.
    if (this.#store !== null && this.#toSave.length > 0) {
      const mine = new Set(q.digests);
      this.#toSave = this.#toSave.filter((d) => !mine.has(d));
    }
    return n;
  }

  /** Puts q in the waiting queue at its place by Request.__lt__ (after its equals: none, ids are unique). */
  #insertByPriority (q: Req): void {
    const w = this.#waiting;
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
    for (let w = this.#waiting.length - 1; w >= 0; w--) {
      const q = this.#waiting[w];
      if (q.status !== Status.Waiting || q.blocks.length === 0) continue;
      this.#freeBlocks(q);
      q.numComputed = 0;
      q.storeBlocks = -1;
      q.prefillTarget = q.numPrompt + q.out.length;
      q.preemptions++;
      this.#preemptions++;
      return true;
    }
    return false;
  }

  /** Checks internal invariants (tests): the pool's, and that each block is referenced exactly refCount times. */
  check (): void {
    this.pool.check();
    const refs = new Int32Array(this.pool.numBlocks);
    for (const q of this.#reqs.values()) for (const b of q.blocks) refs[b]++;
    for (const h of this.#held.values()) for (const b of h.blocks) refs[b]++;
    for (let b = 0; b < refs.length; b++) if (refs[b] !== this.pool.refCount[b]) throw new Error(`block ${b}: ${refs[b]} holders, refcount ${this.pool.refCount[b]}`);
    if (this.#running.length + this.#waiting.length !== this.#reqs.size) throw new Error('request lists disagree with the request table');
    if (this.#byPriority) {
      for (let i = 1; i < this.#waiting.length; i++) if (!runsBefore(this.#waiting[i - 1], this.#waiting[i])) throw new Error(`waiting queue out of priority order at ${i}`);
    }
  }

  /** Longest run of cached leading blocks, leaving at least one prompt token to compute (as vLLM). */
  #lookup (q: Req): number {
    const maxBlocks = Math.floor((q.numPrompt + q.out.length - 1) / this.blockSize);
    this.#extendDigests(q, maxBlocks);
    const hb = this.#hitBlocks;
    hb.length = 0;
    for (let i = 0; i < maxBlocks; i++) {
      const b = this.pool.lookup(q.digests[i]);
      if (b < 0) break;
      hb.push(b);
    }
    return hb.length;
  }

  /**
   * Gives `q` the blocks for numComputed + hits·blockSize + numNew tokens (hits = the leading cached blocks
   * found by #lookup, taken by reference), then caches the blocks those tokens fill. False if too few blocks.
   */
  #allocate (q: Req, numNew: number, hits: number): boolean {
    const bs = this.blockSize;
    const total = q.numComputed + hits * bs + numNew;
    const need = Math.ceil(total / bs) - q.blocks.length - hits;
    if (!this.#takeHits(q, hits, need)) return false;
    q.numCachedBlocks += hits;
    q.numComputed += hits * bs;
    if (need > 0) this.pool.allocate(need, q.blocks);
    const from = q.numCachedBlocks;
    this.#cacheFullBlocks(q, total);
    // The blocks these scheduled tokens fill are computed by this step (hits and loads were computed elsewhere).
    if (this.#store !== null) for (let i = from; i < q.numCachedBlocks; i++) this.#toSave.push(q.digests[i]);
    return true;
  }

  /** Hashes the request's blocks up to `numBlocks` (prompt and generated tokens), reusing those it has. */
  #extendDigests (q: Req, numBlocks: number): void {
    const bs = this.blockSize;
    const d = q.digests;
    for (let i = d.length; i < numBlocks; i++) {
      const extra = i === 0 ? blockExtraKeys(0, q.r.loraName, q.r.cacheSalt) : q.extraLora;
      const parent = i === 0 ? null : d[i - 1];
      const start = i * bs;
      if (start + bs <= q.numPrompt) d.push(this.hasher.hashBlock(parent, q.prompt, start, extra));
      else d.push(this.hasher.hashBlock(parent, tokenSlice(q, start, start + bs), 0, extra));
    }
  }

  /** Caches the blocks that `numTokens` scheduled tokens fill; one BlockStored per run of newly cached blocks. */
  #cacheFullBlocks (q: Req, numTokens: number): void {
    const bs = this.blockSize;
    const full = Math.floor(numTokens / bs);
    const from = q.numCachedBlocks;
    if (full <= from) return;
    this.#extendDigests(q, full);
    let run = -1;
    for (let i = from; i <= full; i++) {
      const ok = i < full && this.pool.cache(q.blocks[i], q.digests[i]);
      if (ok && run < 0) run = i;
      else if (!ok && run >= 0) { this.#emitStored(q, run, i); run = -1; }
    }
    q.numCachedBlocks = full;
  }

  #emitStored (q: Req, from: number, to: number): void {
    const bs = this.blockSize;
    let extraKeys: Array<unknown[] | null> | null = null;
    if (q.r.loraName !== null || (q.r.cacheSalt !== null && from === 0)) {
      extraKeys = [];
      for (let i = from; i < to; i++) extraKeys.push(blockExtraKeys(i, q.r.loraName, q.r.cacheSalt));
    }
    const e: BlockStored<Uint8Array> = {
      type: 'BlockStored',
      blockHashes: q.digests.slice(from, to),
      parentBlockHash: from === 0 ? null : q.digests[from - 1],
      tokenIds: tokenSlice(q, from * bs, to * bs),
      blockSize: bs,
      loraId: null,
      medium: 'GPU',
      loraName: q.r.loraName,
      extraKeys,
      groupIdx: null
    };
    this.pool.emit(e);
  }

  /**
   * Starts the pull of the prefix blocks this engine lacks. True if the request now waits for the transfer,
   * false if nothing needs pulling (ordinary prefill), null if the blocks for the pull are not free yet.
   */
  #startImport (q: Req, hits: number, now: number): boolean | null {
    const bs = this.blockSize;
    const src = q.r.kvImport!.prefixTokenIds;
    const lim = Math.min(src.length, q.numPrompt);
    let m = 0;
    while (m < lim && src[m] === q.prompt[m]) m++;
    const remoteBlocks = Math.floor(m / bs);
    if (remoteBlocks <= hits) { q.importStarted = true; return false; }
    // The pull needs blocks for the whole remote prefix: the local hits by reference, fresh ones for the rest.
    const saved = q.numComputed;
    if (!this.#allocateNoCache(q, remoteBlocks, hits)) return null;
    q.numComputed = saved;
    q.importStarted = true;
    q.status = Status.WaitingForRemoteKvs;
    q.importTokens = remoteBlocks * bs;
    const missing = (remoteBlocks - hits) * bs;
    q.readyAt = now + transferTime(this.profile, missing);
    this.importedTokens += missing;
    this.importedBytes += missing * this.profile.kvBytesPerToken;
    this.#queries += q.numPrompt;
    this.#hits += hits * bs;
    return true;
  }

  /**
   * Starts loading the blocks the offload store holds beyond the local hits. True if the request now waits for
   * the load, false if the store adds nothing (ordinary prefill), null if the blocks to load into are not free.
   */
  #startLoad (q: Req, hits: number, now: number): boolean | null {
    const bs = this.blockSize;
    // As for local hits, at least one token is left to compute. The answer is kept while the request waits
    // for blocks, so a stalled queue does not ask the store at every step.
    if (q.storeBlocks < 0) q.storeBlocks = this.#store!.lookup(q.digests, Math.floor((q.numPrompt + q.out.length - 1) / bs), now);
    const stored = q.storeBlocks;
    if (stored <= hits) return false;
    if (!this.#allocateNoCache(q, stored, hits)) return null;
    q.status = Status.WaitingForRemoteKvs;
    q.importTokens = stored * bs;
    const missing = (stored - hits) * bs;
    q.readyAt = now + offloadLoadTime(this.profile, missing);
    this.offloadLoads++;
    this.offloadLoadedTokens += missing;
    this.offloadLoadedBytes += missing * this.profile.kvBytesPerToken;
    if (q.numCachedTokens < 0) {
      this.#queries += q.numPrompt;
      this.#hits += hits * bs;
    }
    return true;
  }

  /**
   * Takes the `hits` cached blocks found by #lookup into q, if the pool can also supply `need` fresh blocks
   * (a hit block with no other holder sits in the free queue, so taking it uses up a free block too).
   */
  #takeHits (q: Req, hits: number, need: number): boolean {
    let evictableHits = 0;
    for (let i = 0; i < hits; i++) if (this.pool.refCount[this.#hitBlocks[i]] === 0) evictableHits++;
    if (need + evictableHits > this.pool.numFree) return false;
    for (let i = 0; i < hits; i++) {
      this.pool.touch(this.#hitBlocks[i]);
      q.blocks.push(this.#hitBlocks[i]);
    }
    return true;
  }

  #allocateNoCache (q: Req, numBlocks: number, hits: number): boolean {
    const need = numBlocks - hits;
    if (!this.#takeHits(q, hits, need)) return false;
    q.numCachedBlocks = hits;
    this.pool.allocate(need, q.blocks);
    return true;
  }

  /** Pulls that completed by `now`: the blocks are filled, so they enter the prefix cache (→ BlockStored). */
  #finishTransfers (now: number): void {
    for (const q of this.#waiting) {
      if (q.status !== Status.WaitingForRemoteKvs || q.readyAt > now) continue;
      // The last prompt token is recomputed here, as vLLM does, so the request has something to prefill.
      q.numComputed = q.importTokens === q.numPrompt ? q.importTokens - 1 : q.importTokens;
      this.#cacheFullBlocks(q, q.numComputed);
      // vLLM counts connector-loaded tokens in num_cached_tokens (→ usage cached_tokens); a re-prefill after a
      // preemption keeps the first figure.
      if (q.numCachedTokens < 0) q.numCachedTokens = q.numComputed;
      q.status = Status.Waiting;
      this.#stalled = false;
    }
  }

  #preempt (q: Req): void {
    this.#freeBlocks(q);
    q.numComputed = 0;
    q.storeBlocks = -1;
    q.prefillTarget = q.numPrompt + q.out.length;
    q.status = Status.Waiting;
    q.preemptions++;
    this.#preemptions++;
    // _preempt_request: prepend_request, which a priority queue turns into an insertion by key.
    if (this.#byPriority) this.#insertByPriority(q);
    else this.#waiting.unshift(q);
  }

  /** Frees a request's blocks, last block first (so they are evicted first). */
  #freeBlocks (q: Req): void {
    this.pool.free(q.blocks.reverse());
    q.blocks = [];
    q.numCachedBlocks = 0;
  }

  #finish (q: Req, out: RequestOutput, end: number): void {
    this.#running.splice(this.#running.indexOf(q), 1);
    this.#reqs.delete(q.r.id);
    out.metrics = {
      arrivalTime: q.r.arrivalTime,
      firstScheduledTime: q.firstScheduled,
      firstTokenTime: q.firstToken,
      finishTime: end,
      numPromptTokens: q.numPrompt,
      numCachedTokens: q.numCachedTokens,
      numGenerationTokens: q.numOutput,
      numPreemptions: q.preemptions
    };
    if (q.r.kvExport === true) {
      const full = Math.floor(q.numPrompt / this.blockSize) * this.blockSize;
      this.#held.set(q.r.id, { blocks: q.blocks, tokens: Array.from(q.prompt.slice(0, full)), expiry: end + this.#holdTimeout });
      out.heldBlockIds = q.blocks.slice();
      q.blocks = [];
    } else {
      this.#freeBlocks(q);
    }
  }

  #sample (q: Req): number {
    if (q.word === null || q.wordPos >= q.word.length) {
      if (this.#stopProbability > 0 && !q.r.ignoreEos && q.numOutput >= q.r.minTokens && q.r.stopTokenIds.length > 0 &&
          nextRandom(q) < this.#stopProbability) {
        return q.r.stopTokenIds[0];
      }
      q.word = this.#vocab[Math.floor(nextRandom(q) * this.#vocab.length)];
      q.wordPos = 0;
    }
    return q.word[q.wordPos++];
  }
}

/** Tokens [from, to) of prompt + output. */
function tokenSlice (q: Req, from: number, to: number): number[] {
  if (to <= q.numPrompt) return Array.from(q.prompt.slice(from, to));
  const a = new Array<number>(to - from);
  for (let i = from; i < to; i++) a[i - from] = i < q.numPrompt ? q.prompt[i] : q.out[i - q.numPrompt];
  return a;
}
