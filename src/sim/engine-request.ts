// A request inside the engine core (vLLM's v1 Request): its prompt and output, where its KV stands (blocks, digests,
// tokens computed), its place in the scheduler (status, priority) and the figures its output reports.
import type { SimRequest, TokenIds } from './engine-types.js';
import type { BlockDigest } from './block-hash.js';

export const enum Status { Waiting, WaitingForRemoteKvs, Running }

export interface Req {
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
export function runsBefore (a: Req, b: Req): boolean {
  if (a.priority !== b.priority) return a.priority < b.priority;
  if (a.r.arrivalTime !== b.r.arrivalTime) return a.r.arrivalTime < b.r.arrivalTime;
  return a.r.id < b.r.id;
}

/** Tokens [from, to) of prompt + output. */
export function tokenSlice (q: Req, from: number, to: number): number[] {
  if (to <= q.numPrompt) return Array.from(q.prompt.slice(from, to));
  const a = new Array<number>(to - from);
  for (let i = from; i < to; i++) a[i - from] = i < q.numPrompt ? q.prompt[i] : q.out[i - q.numPrompt];
  return a;
}
