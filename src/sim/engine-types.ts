// The contract between the simulator's engine core (no I/O, no timers, no clock of its own) and its hosts:
// the HTTP server on a real clock (`ear sim`) and the discrete-event host on a virtual one (`ear eval --driver des`).
// A host calls step(now) whenever the engine has work; the step "takes" `duration` seconds of modelled GPU
// time, and the host delivers its outputs and KV events when that time has passed (real or virtual).
import type { KvEvent } from '../kvevents/types.js';

export type FinishReason = 'stop' | 'length' | 'abort';

/** A prompt's token ids: a plain array, or a Uint32Array (the evaluation builds prompts as typed arrays, 8× cheaper). */
export type TokenIds = readonly number[] | Uint32Array;

/** KV import (the target side of a transfer, kv-transfer.md §2a): blocks pulled from another engine. */
export interface KvImport {
  /** Token ids of the full blocks the source holds for this prompt's prefix (what the pull carries). */
  prefixTokenIds: number[];
  /** Bytes the pull moves, decided by the host from the blocks the target lacks; timed by the profile's bandwidth. */
  sourceEngineId: string;
}

export interface SimRequest {
  id: string;
  promptTokenIds: TokenIds;
  /** Already capped by the host to max_model_len − prompt length. */
  maxTokens: number;
  minTokens: number;
  ignoreEos: boolean;
  /** Token ids that end generation once minTokens are out (EOS unless ignoreEos, plus `stop` rendered to ids). */
  stopTokenIds: number[];
  loraName: string | null;
  /** Salts block 0's hash (vLLM `cache_salt`). */
  cacheSalt: string | null;
  /** Seeds the generated tokens: same seed and prompt, same output. */
  seed: number;
  /** Export (do_remote_decode): on finish, hold the request's blocks for an importer instead of freeing them. */
  kvExport?: boolean;
  kvImport?: KvImport | null;
  /** Host time at which the request arrived (seconds, host clock). */
  arrivalTime: number;
  /**
   * vLLM's request priority (the OpenAI body's `priority`): an integer, lower runs first, default 0. Only a
   * `priority` engine orders by it; an `fcfs` one ignores it, as vLLM V1 does.
   */
  priority?: number;
  /**
   * Optional: sha256_cbor digests of the prompt's first full blocks, computed by the host (e.g. reused from the
   * previous turn that this prompt extends). The engine trusts them and hashes only the blocks after them.
   */
  blockHashes?: Uint8Array[];
}

/** Per-request timings (host clock, seconds) and counts, on a finished output: what vllm:* histograms need. */
export interface RequestMetrics {
  arrivalTime: number;
  /** First time the request was scheduled (end of queueing). */
  firstScheduledTime: number;
  /** End of the step that produced the first token. */
  firstTokenTime: number;
  /** End of the step that finished it. */
  finishTime: number;
  numPromptTokens: number;
  numCachedTokens: number;
  numGenerationTokens: number;
  numPreemptions: number;
}

export interface RequestOutput {
  id: string;
  /** Tokens produced by this step (empty while prefilling). */
  newTokenIds: number[];
  /** Prompt tokens served from the prefix cache (whole blocks), known from the first scheduled step on. */
  numCachedTokens: number;
  finished: FinishReason | null;
  /** The stop token id that ended it, if any. */
  stopReason: number | null;
  /** On an export request's finish: the ids of the blocks held for the importer. */
  heldBlockIds?: number[];
  /** On finish (not on abort): timings and counts. */
  metrics?: RequestMetrics;
}

export interface StepResult {
  /** Modelled seconds this step takes. */
  duration: number;
  outputs: RequestOutput[];
  /** Events in emission order, hashes as raw digests (the publisher encodes them per --kv-hash-format). */
  kvEvents: Array<KvEvent<Uint8Array>>;
}

export interface EngineStats {
  running: number;
  waiting: number;
  /** Fraction of KV blocks in use, 0..1. */
  kvUsage: number;
  /** Prompt tokens not yet computed over running and waiting requests (the gateway's "pending prefill"). */
  pendingPrefillTokens: number;
  numGpuBlocks: number;
  blockSize: number;
  /** Counters since start. */
  prefixCacheQueries: number;
  prefixCacheHits: number;
  promptTokens: number;
  generationTokens: number;
  preemptions: number;
}
