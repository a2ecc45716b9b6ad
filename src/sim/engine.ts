// The simulator's engine core: vLLM v1-like continuous batching over paged, prefix-cached KV blocks.
// No I/O, no timers, no clock: a host calls step(now), waits `duration` (real or virtual), then delivers the
// step's outputs and KV events. Split as vLLM's engine core is:
// - the scheduler (scheduler.ts): which requests compute how many tokens in a step, the waiting queue's policy
//   (fcfs or priority), preemption, KV pulls and offload-store loads (vllm/v1/core/sched/scheduler.py);
// - the KV block manager (kv-block-manager.ts): prefix-cache hits, block allocation, full blocks hashed and cached
//   as their tokens are scheduled, prompt and generated alike (→ BlockStored) (KVCacheManager over BlockPool);
// - the transfer holds (kv-transfer-holds.ts): kvExport requests stop after one token and hold their blocks for an
//   importer (kv-transfer.md §2b);
// - this file, the engine loop: requests in and out, each step scheduled, timed, its tokens sampled and its
//   finished requests retired; with a shared offload store (§3, §6b), every block a step computes is saved to it
//   at the step's end.
import type { EngineStats, FinishReason, RequestOutput, SimRequest, StepResult } from './engine-types.js';
import { BlockHasher, type BlockDigest } from './block-hash.js';
import { BlockPool } from './block-pool.js';
import type { OffloadTier } from './offload-store.js';
import { stepTime } from '../engine-model/figures.js';
import { resolveProfile, type EngineProfile, type ResolvedProfile } from '../engine-model/profile.js';
import { DEFAULT_VOCABULARY, generationSeed, nextRandom, validateVocabulary } from './token-generator.js';
import { EarError } from '../errors/errors.js';
import { Status, type Req } from './engine-request.js';
import { KvBlockManager } from './kv-block-manager.js';
import { Scheduler } from './scheduler.js';
import { TransferHolds } from './kv-transfer-holds.js';

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

export class SimEngine {
  readonly profile: ResolvedProfile;
  readonly blockSize: number;
  readonly hasher: BlockHasher;
  readonly pool: BlockPool;
  readonly #vocab: readonly (readonly number[])[];
  readonly #stopProbability: number;
  readonly #maxWaiting: number;
  readonly #store: OffloadTier | null;
  readonly schedulingPolicy: SchedulingPolicy;
  readonly longPrefillTokenThreshold: number;
  readonly #kv: KvBlockManager;
  readonly #scheduler: Scheduler;
  readonly #holds: TransferHolds;
  readonly #reqs = new Map<string, Req>();
  // Scratch arrays for one step (reused: no per-step allocation besides outputs).
  #prefNew: number[] = [];
  #prefPast: number[] = [];
  // Counters since start (the scheduler keeps those of scheduling, pulls and loads).
  #generationTokens = 0;
  expiredHolds = 0;
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
    const holdTimeout = opts.holdTimeout ?? 480;
    if (!(holdTimeout > 0)) throw new RangeError('holdTimeout must be > 0 seconds');
    this.#maxWaiting = opts.maxWaiting ?? 65536;
    if (!(Number.isInteger(this.#maxWaiting) && this.#maxWaiting > 0)) throw new RangeError('maxWaiting must be a positive integer');
    this.#store = opts.offloadStore ?? null;
    this.schedulingPolicy = opts.schedulingPolicy ?? 'fcfs';
    if (!SCHEDULING_POLICIES.includes(this.schedulingPolicy)) throw new RangeError(`schedulingPolicy must be one of ${SCHEDULING_POLICIES.join(', ')}, got ${JSON.stringify(this.schedulingPolicy)}`);
    this.longPrefillTokenThreshold = opts.longPrefillTokenThreshold ?? 0;
    if (!(Number.isSafeInteger(this.longPrefillTokenThreshold) && this.longPrefillTokenThreshold >= 0)) {
      throw new RangeError(`longPrefillTokenThreshold must be an integer >= 0, got ${this.longPrefillTokenThreshold}`);
    }
    this.#kv = new KvBlockManager(this.hasher, this.pool, this.#store !== null);
    this.#scheduler = new Scheduler(this.profile, this.#kv, this.#store, this.schedulingPolicy === 'priority', this.longPrefillTokenThreshold);
    this.#holds = new TransferHolds(this.pool, holdTimeout);
  }

  /** KV pulled by kvImport requests: tokens and bytes this engine did not compute. */
  get importedTokens (): number { return this.#scheduler.importedTokens; }
  get importedBytes (): number { return this.#scheduler.importedBytes; }
  /** Offload-store loads: requests that loaded, tokens and bytes they loaded instead of prefilling. */
  get offloadLoads (): number { return this.#scheduler.offloadLoads; }
  get offloadLoadedTokens (): number { return this.#scheduler.offloadLoadedTokens; }
  get offloadLoadedBytes (): number { return this.#scheduler.offloadLoadedBytes; }

  /**
   * Queues a request. Throws RangeError on invalid input, ContextLengthError over max_model_len, KvCapacityError
   * beyond the KV cache (both 400s, src/errors/errors.ts) and EngineFullError when the waiting queue is full
   * (preempted requests return to the queue beyond that bound: at most max_num_seqs more). The engine keeps
   * `promptTokenIds` by reference until the request ends: the host must not mutate it.
   */
  addRequest (r: SimRequest): void {
    const bs = this.blockSize;
    if (typeof r.id !== 'string' || r.id.length === 0) throw new RangeError('request id must be a non-empty string');
    if (this.#reqs.has(r.id) || this.#holds.has(r.id)) throw new RangeError(`request id ${JSON.stringify(r.id)} is already in use`);
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
    if (this.#scheduler.waiting.length >= this.#maxWaiting) throw new EngineFullError(`waiting queue is full (${this.#maxWaiting} requests)`);
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
    this.#scheduler.add(q);
  }

  /** Drops a request wherever it is and frees its blocks (or its held blocks). False if unknown. */
  abortRequest (id: string): boolean {
    if (this.releaseHeld(id)) return true;
    const q = this.#reqs.get(id);
    if (q === undefined) return false;
    this.#reqs.delete(id);
    this.#scheduler.remove(q);
    this.#kv.free(q);
    this.#scheduler.stalled = false;
    return true;
  }

  /** Frees an export's held blocks (the importer read them). False if nothing is held under that id. */
  releaseHeld (id: string): boolean {
    if (!this.#holds.release(id)) return false;
    this.#scheduler.stalled = false;
    return true;
  }

  /** Token ids of the full blocks an export holds (what an importer pulls), or null if none is held. */
  heldBlocks (id: string): number[] | null {
    return this.#holds.tokens(id);
  }

  /** Frees holds whose timeout passed by `now` (also done at every step). */
  expireHolds (now: number): void {
    const n = this.#holds.expire(now);
    if (n === 0) return;
    this.expiredHolds += n;
    this.#scheduler.stalled = false;
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
    const s = this.#scheduler;
    if (s.running.length > 0) return now;
    let t = Infinity;
    let stalled = false;
    for (const q of s.waiting) {
      if (q.status === Status.WaitingForRemoteKvs) t = Math.min(t, q.readyAt);
      else if (!s.stalled) return now;
      else stalled = true;
    }
    // A request stalled on blocks can be unblocked by a hold expiring.
    if (stalled) t = Math.min(t, this.#holds.nextExpiry());
    return t === Infinity ? null : Math.max(t, now);
  }

  hasRequest (id: string): boolean { return this.#reqs.has(id); }

  stats (): EngineStats {
    const s = this.#scheduler;
    let pending = 0;
    for (const q of s.running) pending += Math.max(0, q.prefillTarget - q.numComputed);
    for (const q of s.waiting) pending += Math.max(0, q.prefillTarget - q.numComputed);
    return {
      running: s.running.length,
      waiting: s.waiting.length,
      kvUsage: this.pool.numUsed / this.pool.numBlocks,
      pendingPrefillTokens: pending,
      numGpuBlocks: this.pool.numBlocks,
      blockSize: this.blockSize,
      prefixCacheQueries: s.queries,
      prefixCacheHits: s.hits,
      promptTokens: s.promptTokens,
      generationTokens: this.#generationTokens,
      preemptions: s.preemptions
    };
  }

  /** Runs one scheduler step at host time `now`. Outputs are to be delivered at now + duration. */
  step (now: number): StepResult {
    this.expireHolds(now);
    const s = this.#scheduler;
    s.finishTransfers(now);
    const p = this.profile;
    // 1–2. The schedule: running requests, then waiting ones (scheduler.ts).
    const preempted = s.schedule(now);
    const sched = s.sched;
    const schedNew = s.schedNew;

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
    s.stalled = sched.length === 0 && !preempted;
    const end = now + duration;
    if (this.#kv.toSave.length > 0) {
      // Saved during the forward pass (LMCache's save_kv_layer): off the critical path, visible once computed.
      this.offloadSavedBlocks += this.#kv.toSave.length;
      this.#store!.save(this.#kv.toSave, end);
      this.#kv.toSave = [];
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

  /** Checks internal invariants (tests): the pool's, and that each block is referenced exactly refCount times. */
  check (): void {
    this.pool.check();
    const refs = new Int32Array(this.pool.numBlocks);
    for (const q of this.#reqs.values()) for (const b of q.blocks) refs[b]++;
    this.#holds.countRefs(refs);
    for (let b = 0; b < refs.length; b++) if (refs[b] !== this.pool.refCount[b]) throw new Error(`block ${b}: ${refs[b]} holders, refcount ${this.pool.refCount[b]}`);
    if (this.#scheduler.running.length + this.#scheduler.waiting.length !== this.#reqs.size) throw new Error('request lists disagree with the request table');
    this.#scheduler.check();
  }

  #finish (q: Req, out: RequestOutput, end: number): void {
    const running = this.#scheduler.running;
    running.splice(running.indexOf(q), 1);
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
      this.#holds.hold(q.r.id, q.blocks, Array.from(q.prompt.slice(0, full)), end);
      out.heldBlockIds = q.blocks.slice();
      q.blocks = [];
    } else {
      this.#kv.free(q);
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
