// The agentic workload generator: closed-loop coding-agent sessions matched to the production trace EAR was
// designed from (evaluation.md): prompt/output ≈ 75, mean prompt ≈ 33.6k tokens, p99 prompt ≈ 120k, top 1% of
// sessions ≈ 46.5% of input tokens, KV reuse ≈ 93% intra-session / 6% cross-session / 1% shared prefix, and an
// APC upper bound (one infinite cache) ≈ 80%: a fifth of the input tokens are new, mostly large tool results.
//
// The model: sessions arrive as a Poisson process and belong to one of `clients`, whose sessions share a
// system + tool prompt (shared-prefix reuse) followed by the client's project context (repository map,
// instructions, the task's files: cross-session reuse), then the session's own task. A session runs a
// heavy-tailed (log-normal) number of turns; turn k's prompt is turn k−1's prompt plus its output plus a tool
// result, sent a log-normal tool delay after the response. A share of the tool results are large (a file read,
// a test log): those are most of the new input tokens. Now and then the agent finishes its task and starts the
// next one in the same session (as after a /clear): the context goes back to the system prompt and a new task
// message, which keeps the mean prompt near 33.6k although prompts grow fast. A prompt over `maxContext` is
// compacted (system prompt + a fresh summary), as coding agents do. Some sessions resume (fork) an earlier
// session of the same client: they start from the context of its latest turn already sent, which is where
// cross-session reuse comes from, with the project context.
//
// Realised with the defaults (`node dist/bench/agentic-stats.js`):
//
//   seed  sessions requests  prompt/output  mean prompt  p99 prompt  top 1%  APC bound  intra-session  reuse intra/cross/shared
//   1     301      4471      75.9           33.9k        118.8k      46.4%   80.9%      74.6%          92.2 / 6.8 / 1.0%
//   2     315      5797      75.8           34.3k        120.9k      49.3%   80.2%      75.8%          94.5 / 4.7 / 0.8%
//   3     302      3974      71.2           31.7k        118.5k      40.7%   79.1%      74.2%          93.8 / 5.0 / 1.2%
//   trace                    75             33.6k        120k        46.5%   80.3%      79.6%          93 / 6 / 1%
//
// The intra-session bound cannot meet both the trace's 79.6% and its reuse split: the hits that only another
// session's blocks give are exactly the cross-session and shared-prefix ones, so (APC bound − intra-session
// bound) = (cross + shared share of the hits) × APC bound, 7% × 80% ≈ 5.6 points here, where the trace's two
// bounds differ by 0.7. The generator keeps the split (the trace must have counted one of them another way).
import { Rng } from './rng.js';
import type { Arrival, ClosedLoopWorkload, Session, Turn } from './types.js';

export interface AgenticOptions {
  seed: number;
  /** Session arrival rate Λ (sessions/s) of the Poisson process. */
  rate: number;
  /** Arrival window in seconds (sessions = Poisson count in it), unless `sessions` is set. */
  duration: number;
  /** Exact number of sessions (overrides `duration`). */
  sessions: number | null;
  /** Keep this many sessions running instead of Poisson arrivals (the sessions are still the Poisson count
   *  over `duration`, or `sessions`). */
  concurrency: number | null;
  clients: number;
  blockSize: number;
  /** System + tool prompt per client, whole blocks. */
  systemTokens: number;
  /** Turns per session: log-normal median and σ, capped. */
  turnsMedian: number;
  turnsSigma: number;
  turnsMax: number;
  /** Project context after the system prompt, one per client, whole blocks: log-normal. */
  projectMedian: number;
  projectSigma: number;
  /** The first user message (task) in tokens: log-normal. */
  taskMedian: number;
  taskSigma: number;
  /** Output tokens per turn: log-normal. */
  outputMedian: number;
  outputSigma: number;
  /** Tool result tokens appended per turn: log-normal. */
  toolResultMedian: number;
  toolResultSigma: number;
  /** Share of turns (after the first) whose tool result is large, a file read or a test log, added to the
   *  ordinary one: log-normal. These are most of the input tokens no cache can hold. */
  largeToolProbability: number;
  largeToolMedian: number;
  largeToolSigma: number;
  /** Tool delay in seconds between a response and the next turn: log-normal. */
  toolDelayMedian: number;
  toolDelaySigma: number;
  /** Chance per turn (after the first) that the agent has finished its task and starts the next one in the same
   *  session (as after a /clear): the context goes back to the system prompt, then a new task message. */
  newTaskProbability: number;
  /** Share of sessions that resume an earlier session of their client. */
  forkProbability: number;
  /** Prompt length beyond which the context is compacted to the system prompt plus a summary. */
  maxContext: number;
  summaryTokens: number;
  /** Only to order requests for the realised statistics: a nominal prefill rate and decode time per token. */
  nominalPrefillRate: number;
  nominalDecodeTime: number;
}

// Defaults tuned with stats.ts to the targets above (the table in the header). `maxContext` = 124 Ki tokens:
// above the trace's p99 prompt of 120k, and below the 128 Ki max_model_len of the smallest shipped engine profile
// (h100-llama-3.1-8b) with room for the output (seeds 1–3: prompt + output ≤ 129,060 tokens), so that a default run
// fits every profile.
export const AGENTIC_DEFAULTS: Readonly<AgenticOptions> = Object.freeze({
  seed: 1,
  rate: 0.5,
  duration: 600,
  sessions: null,
  concurrency: null,
  clients: 8,
  blockSize: 64,
  systemTokens: 4096,
  turnsMedian: 2,
  turnsSigma: 2.0,
  turnsMax: 2000,
  projectMedian: 19200,
  projectSigma: 0.5,
  taskMedian: 1500,
  taskSigma: 1.0,
  outputMedian: 270,
  outputSigma: 1.0,
  toolResultMedian: 300,
  toolResultSigma: 1.1,
  largeToolProbability: 0.42,
  largeToolMedian: 12500,
  largeToolSigma: 0.9,
  toolDelayMedian: 3,
  toolDelaySigma: 1.0,
  newTaskProbability: 0.18,
  forkProbability: 0.055,
  maxContext: 126976,
  summaryTokens: 6000,
  nominalPrefillRate: 20000,
  nominalDecodeTime: 0.025,
});

function check (o: AgenticOptions): void {
  const positive: Array<keyof AgenticOptions> = ['rate', 'duration', 'clients', 'blockSize', 'turnsMedian', 'turnsMax',
    'projectMedian', 'taskMedian', 'outputMedian', 'toolResultMedian', 'largeToolMedian', 'toolDelayMedian', 'maxContext', 'summaryTokens', 'nominalPrefillRate'];
  for (const k of positive) {
    const v = o[k] as number;
    if (!(typeof v === 'number' && Number.isFinite(v) && v > 0)) throw new RangeError(`agentic: ${k} must be a finite number > 0, got ${String(v)}`);
  }
  for (const k of ['turnsSigma', 'projectSigma', 'taskSigma', 'outputSigma', 'toolResultSigma', 'largeToolSigma', 'toolDelaySigma', 'systemTokens', 'nominalDecodeTime'] as const) {
    if (!(Number.isFinite(o[k]) && o[k] >= 0)) throw new RangeError(`agentic: ${k} must be a finite number ≥ 0, got ${String(o[k])}`);
  }
  for (const k of ['forkProbability', 'largeToolProbability', 'newTaskProbability'] as const) {
    if (!(o[k] >= 0 && o[k] <= 1)) throw new RangeError(`agentic: ${k} must be in [0, 1], got ${o[k]}`);
  }
  if (!Number.isInteger(o.blockSize) || !Number.isInteger(o.clients)) throw new RangeError('agentic: blockSize and clients must be integers');
  if (o.sessions !== null && !(Number.isInteger(o.sessions) && o.sessions >= 0)) throw new RangeError(`agentic: sessions must be an integer ≥ 0, got ${o.sessions}`);
  if (o.concurrency !== null && !(Number.isInteger(o.concurrency) && o.concurrency > 0)) throw new RangeError(`agentic: concurrency must be an integer > 0, got ${o.concurrency}`);
  if (o.systemTokens + o.summaryTokens >= o.maxContext) throw new RangeError('agentic: systemTokens + summaryTokens must be below maxContext');
}

/** A session under construction: its turns, and each turn's full block list (for forks) and nominal send time. */
interface Draft {
  session: Session; client: number; turns: Turn[];
  /** Turn j's full blocks are prefixes[j].arr[0 .. len): arrays are only ever extended past a stored length. */
  prefixes: Array<{ arr: number[]; len: number }>;
  sentAt: number[];
}

export function agentic (options: Partial<AgenticOptions> = {}): ClosedLoopWorkload {
  const o: AgenticOptions = { ...AGENTIC_DEFAULTS, ...options };
  check(o);
  const bs = o.blockSize;
  let nextBlock = 0;
  const fresh = (n: number, out: number[]): void => { for (let i = 0; i < n; i++) out.push(nextBlock++); };

  // One stream per concern, so changing one parameter does not reshuffle the others.
  const arrivals = new Rng(o.seed, 1), shape = new Rng(o.seed, 2), tokens = new Rng(o.seed, 3), delays = new Rng(o.seed, 4), forks = new Rng(o.seed, 5);
  const large = new Rng(o.seed, 6), tasks = new Rng(o.seed, 7);

  const sharedPrefixBlocks = new Set<number>();
  const clientPrefix: number[][] = [];
  const sysFull = Math.floor(o.systemTokens / bs);
  for (let c = 0; c < o.clients; c++) {
    const b: number[] = [];
    fresh(sysFull, b);
    b.forEach((x) => sharedPrefixBlocks.add(x));
    fresh(Math.round(shape.logNormal(o.projectMedian, o.projectSigma) / bs), b);
    clientPrefix.push(b);
  }

  const starts: number[] = [];
  if (o.sessions !== null) for (let t = 0, i = 0; i < o.sessions; i++) { t += arrivals.exponential(o.rate); starts.push(t); }
  else for (let t = arrivals.exponential(o.rate); t < o.duration; t += arrivals.exponential(o.rate)) starts.push(t);

  const drafts: Draft[] = [];
  const byClient: Draft[][] = Array.from({ length: o.clients }, () => []);
  const ln = (r: Rng, median: number, sigma: number): number => Math.max(1, Math.round(r.logNormal(median, sigma)));

  for (let i = 0; i < starts.length; i++) {
    // Forks and the nominal timeline follow the Poisson draw even under concurrency arrivals (start 0 there).
    const nominalStart = starts[i];
    const start = o.concurrency !== null ? 0 : nominalStart;
    const client = shape.int(o.clients);
    const nTurns = Math.min(o.turnsMax, ln(shape, o.turnsMedian, o.turnsSigma));
    const turns: Turn[] = [];
    const draft: Draft = {
      session: { id: `a${i}`, parentId: null, client: `c${client}`, start, turns, children: [] },
      client, turns, prefixes: [], sentAt: [],
    };

    // Turn 0: system prompt + project context + task, or (a fork) the context of an earlier session of the client.
    let blocks: number[] = clientPrefix[client].slice();
    let context = blocks.length * bs;
    const wantsFork = forks.next() < o.forkProbability;
    if (wantsFork) {
      const candidates = byClient[client];
      // Resume the latest turn (nominally) sent before this session starts, of an earlier session of the client.
      for (let tries = 0; tries < 8 && candidates.length > 0; tries++) {
        const src = candidates[forks.int(candidates.length)];
        const sent = src.sentAt.filter((t) => t < nominalStart).length;
        if (sent === 0) continue;
        const p = src.prefixes[sent - 1];
        blocks = p.arr.slice(0, p.len);
        context = blocks.length * bs;
        break;
      }
    }
    context += ln(tokens, o.taskMedian, o.taskSigma);
    let prevFull = 0;
    let t = nominalStart;
    for (let k = 0; k < nTurns; k++) {
      // `blocks` becomes the whole blocks this prompt starts with (the rest of `context` is fresh); `keep` how
      // many of them lead the previous prompt too.
      let keep = 0;
      if (k > 0) {
        const prevOut = turns[k - 1].outputTokens;
        let tool = ln(tokens, o.toolResultMedian, o.toolResultSigma);
        if (large.next() < o.largeToolProbability) tool += ln(large, o.largeToolMedian, o.largeToolSigma);
        const grown = context + prevOut + tool;
        if (tasks.next() < o.newTaskProbability) { // the next task: the system prompt, then a new task message
          keep = Math.min(prevFull, sysFull);
          blocks = blocks.slice(0, sysFull);
          context = sysFull * bs + ln(tasks, o.taskMedian, o.taskSigma);
        } else if (grown > o.maxContext) { // compaction: the system prompt stays, the rest becomes a summary
          keep = Math.min(prevFull, sysFull);
          blocks = blocks.slice(0, sysFull);
          context = sysFull * bs + o.summaryTokens;
        } else { // the previous prompt's whole blocks, then its last partial block rewritten with the additions
          keep = prevFull;
          blocks.length = prevFull;
          context = grown;
        }
      }
      fresh(Math.ceil(context / bs) - blocks.length, blocks);
      const outputTokens = ln(tokens, o.outputMedian, o.outputSigma);
      const thinkTime = k === 0 ? 0 : delays.logNormal(o.toolDelayMedian, o.toolDelaySigma);
      const newBlocks = Uint32Array.from(blocks.slice(keep));
      const nominalServiceTime = (context - keep * bs) / o.nominalPrefillRate + outputTokens * o.nominalDecodeTime;
      turns.push({ keepBlocks: keep, newBlocks, promptTokens: context, outputTokens, thinkTime, nominalServiceTime });
      t += thinkTime;
      prevFull = Math.floor(context / bs);
      draft.prefixes.push({ arr: blocks, len: prevFull });
      draft.sentAt.push(t);
      t += nominalServiceTime;
    }
    drafts.push(draft);
    byClient[client].push(draft);
  }

  const arrival: Arrival = o.concurrency !== null ? { mode: 'concurrency', n: o.concurrency } : { mode: 'poisson', rate: o.rate };
  return {
    kind: 'closed',
    name: 'agentic',
    blockSize: bs,
    seed: o.seed,
    sharedPrefixBlocks,
    config: { ...o },
    sessions: drafts.map((d) => d.session),
    arrival,
  };
}
