// A workload's own statistics, the ones evaluation.md names for the production agentic trace: prompt/output
// token ratio, mean and p99 prompt, share of input tokens carried by the top 1% of sessions, the APC upper
// bounds (hit rate of one infinite cache that sees the requests in their nominal order, each turn served in its
// recorded time; and the same restricted to reuse within a session tree), and the split of that cache's hits
// between intra-session, cross-session and shared-prefix blocks.
import { percentile } from '../metrics/latency.js';
import { replay } from './replay.js';
import { allSessions, type PromptSpec, type Workload } from './types.js';

export interface WorkloadStats {
  requests: number;
  /** Root sessions (a session with its sub-agents counts once; open loop: inferred sessions). */
  sessions: number;
  promptTokens: number;
  outputTokens: number;
  promptOutputRatio: number;
  meanPrompt: number;
  /** 99th percentile of the prompt length over requests, tokens. */
  p99Prompt: number;
  /** Share of all prompt tokens sent by the top 1% of sessions (at least one session). */
  top1PctTokenShare: number;
  /** Hit rate of an infinite cache over full blocks, in nominal order: the APC upper bound. */
  reusableShare: number;
  /** The same cache restricted to blocks the request's own session tree sent earlier: the intra-session bound. */
  intraSessionShare: number;
  /** Split of those hits: seen earlier in the same session tree / a shared system+tool prompt block / other sessions. */
  reuseSplit: { intraSession: number; crossSession: number; sharedPrefix: number };
}

interface Req { spec: PromptSpec; root: string; outputTokens: number; sessionId: string }

export function workloadStats (w: Workload): WorkloadStats {
  // Where each request sits (its spec, its root session), keyed by id, then walked in nominal send order.
  const byId = new Map<string, Req>();
  if (w.kind === 'closed') {
    for (const root of w.sessions) {
      for (const s of allSessions([root])) {
        s.turns.forEach((t, k) => byId.set(`${s.id}/${k}`, { spec: t, root: root.id, outputTokens: t.outputTokens, sessionId: s.id }));
      }
    }
  } else {
    for (const r of w.requests) byId.set(`${r.sessionId}/${r.turn}`, { spec: r, root: r.sessionId, outputTokens: r.outputTokens, sessionId: r.sessionId });
  }
  const nominal = (sessionId: string, turn: number): number => {
    if (w.kind === 'open') return 0;
    const r = byId.get(`${sessionId}/${turn}`) as Req;
    return (r.spec as { nominalServiceTime?: number }).nominalServiceTime ?? 0;
  };
  const order = replay(w, nominal).requests;

  const bs = w.blockSize;
  const seen = new Set<number>();
  const seenBy = new Map<string, Set<number>>();
  const blocksOf = new Map<string, number[]>(); // current block list per session
  const perRoot = new Map<string, number>();
  const prompts: number[] = [];
  let prompt = 0, output = 0, hits = 0, ownHits = 0, intra = 0, cross = 0, shared = 0;
  for (const o of order) {
    const r = byId.get(o.id) as Req;
    const prev = blocksOf.get(r.sessionId) ?? [];
    const blocks = prev.slice(0, r.spec.keepBlocks);
    for (const b of r.spec.newBlocks) blocks.push(b);
    blocksOf.set(r.sessionId, blocks);
    prompt += r.spec.promptTokens;
    prompts.push(r.spec.promptTokens);
    output += r.outputTokens;
    perRoot.set(r.root, (perRoot.get(r.root) ?? 0) + r.spec.promptTokens);
    let mine = seenBy.get(r.root);
    if (mine === undefined) { mine = new Set(); seenBy.set(r.root, mine); }
    const full = Math.floor(r.spec.promptTokens / bs);
    let i = 0;
    for (; i < full && seen.has(blocks[i]); i++) {
      if (mine.has(blocks[i])) intra++;
      else if (w.sharedPrefixBlocks.has(blocks[i])) shared++;
      else cross++;
    }
    hits += i;
    let own = 0;
    while (own < full && mine.has(blocks[own])) own++;
    ownHits += own;
    for (let j = i; j < full; j++) seen.add(blocks[j]); // the hit prefixes are in the sets already
    for (let j = own; j < full; j++) mine.add(blocks[j]);
  }
  const totals = [...perRoot.values()].sort((a, b) => b - a);
  const top = Math.max(1, Math.ceil(totals.length * 0.01));
  const topTokens = totals.slice(0, top).reduce((a, b) => a + b, 0);
  const h = Math.max(hits, 1);
  return {
    requests: order.length,
    sessions: perRoot.size,
    promptTokens: prompt,
    outputTokens: output,
    promptOutputRatio: output > 0 ? prompt / output : Infinity,
    meanPrompt: order.length > 0 ? prompt / order.length : 0,
    p99Prompt: percentile(prompts, 99),
    top1PctTokenShare: prompt > 0 ? topTokens / prompt : 0,
    reusableShare: prompt > 0 ? (hits * bs) / prompt : 0,
    intraSessionShare: prompt > 0 ? (ownHits * bs) / prompt : 0,
    reuseSplit: { intraSession: intra / h, crossSession: cross / h, sharedPrefix: shared / h },
  };
}
