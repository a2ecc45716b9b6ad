// The one representation every workload becomes and every driver consumes.
//
// A prompt is a list of blocks (ids in the workload's block space) cut to `promptTokens`: every block is
// `blockSize` tokens except possibly the last. A block id stands for its whole prefix (as in the public
// traces' chained hash_ids), and a block expands to token ids deterministically (prompt-builder.ts), so two
// prompts share token ids exactly where they share leading blocks. A turn stores only what it adds to the
// previous prompt of its session (`keepBlocks` + `newBlocks`): a 33.6k-token prompt costs its appended part.

export interface PromptSpec {
  /** Leading blocks of the session's previous prompt this prompt starts with (0 for a session's first prompt). */
  readonly keepBlocks: number;
  /** Blocks after the kept ones, in order. */
  readonly newBlocks: Uint32Array;
  /** Prompt length; ≤ (keepBlocks + newBlocks.length) · blockSize, the last block may be cut. */
  readonly promptTokens: number;
}

export interface Turn extends PromptSpec {
  /** Output tokens the turn produces (≥ 1); a driver sends it as max_tokens with ignore_eos. */
  readonly outputTokens: number;
  /** Closed loop: seconds from the previous turn's response end (or, if later, the end of the sub-agents this
   *  turn waits for, see ChildLaunch.joinBeforeTurn) to this turn's send; 0 for turn 0. */
  readonly thinkTime: number;
  /** Seconds the turn took where it was recorded (trace api_time, or the generator's estimate); used only to
   *  order requests when computing a workload's own statistics, never by a driver. */
  readonly nominalServiceTime: number;
}

/** A sub-agent: a child session started `delay` s after the parent's turn `afterTurn` ends (−1: after the
 *  parent starts). It runs concurrently with the parent and its siblings; when `joinBeforeTurn` is set, the
 *  parent's turn of that index is not sent before the child (with its own sub-agents) has finished, as an
 *  agent's Task tool call returns only when its sub-agent does. */
export interface ChildLaunch {
  readonly afterTurn: number;
  readonly delay: number;
  readonly joinBeforeTurn: number | null;
  readonly session: Session;
}

export interface Session {
  /** Unique in the workload; a driver derives the routing session key from it. */
  readonly id: string;
  readonly parentId: string | null;
  /** Who sent it (the agentic generator's client; the trace file for claude-code). */
  readonly client: string;
  /** Closed loop: start time in seconds (Poisson arrivals); ignored under `concurrency` arrivals. */
  readonly start: number;
  readonly turns: readonly Turn[];
  readonly children: readonly ChildLaunch[];
}

/** Poisson: each root session starts at its `start`. Concurrency: `n` root sessions (with their sub-agents)
 *  kept running, the next one in order starting when one finishes. */
export type Arrival =
  | { readonly mode: 'poisson'; readonly rate: number }
  | { readonly mode: 'concurrency'; readonly n: number };

interface WorkloadBase {
  /** e.g. 'agentic', 'claude-code:/path', 'mooncake:/path'. */
  readonly name: string;
  readonly blockSize: number;
  /** Seeds the expansion of blocks to token ids. */
  readonly seed: number;
  /** Blocks of shared system + tool prompts (counted as "shared prefix" reuse). */
  readonly sharedPrefixBlocks: ReadonlySet<number>;
  /** The options the workload was built with (recorded in results.json). */
  readonly config: Readonly<Record<string, unknown>>;
}

export interface ClosedLoopWorkload extends WorkloadBase {
  readonly kind: 'closed';
  /** Root sessions in start order; sub-agents hang off their parents. */
  readonly sessions: readonly Session[];
  readonly arrival: Arrival;
}

/** An open-loop request: sent at `at` whatever happened before it. */
export interface OpenRequest extends PromptSpec {
  /** Send time in seconds from the start (already time-scaled). */
  readonly at: number;
  /** Inferred session; `keepBlocks` refers to that session's previous request in list order. */
  readonly sessionId: string;
  /** Index of the request within its session. */
  readonly turn: number;
  /** The session's last request (its prompt state can be dropped after it). */
  readonly final: boolean;
  readonly outputTokens: number;
}

export interface OpenLoopWorkload extends WorkloadBase {
  readonly kind: 'open';
  /** Sorted by `at`. */
  readonly requests: readonly OpenRequest[];
}

export type Workload = ClosedLoopWorkload | OpenLoopWorkload;

/** The id a driver and the metrics use for one request: `${sessionId}/${turn}`. */
export function requestId (sessionId: string, turn: number): string {
  return `${sessionId}/${turn}`;
}

/** Every session of a closed-loop workload, parents before their children. */
export function * allSessions (sessions: readonly Session[]): Generator<Session> {
  for (const s of sessions) {
    yield s;
    yield * allSessions(s.children.map((c) => c.session));
  }
}
