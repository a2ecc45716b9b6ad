import { test } from 'node:test';
import assert from 'node:assert/strict';
import { agentic, AGENTIC_DEFAULTS } from '../../../src/eval/workloads/agentic.js';
import { SessionPrompt } from '../../../src/eval/workloads/prompt-builder.js';
import { workloadStats, type WorkloadStats } from '../../../src/eval/workloads/stats.js';
import { loadWorkload } from '../../../src/eval/workloads/index.js';

test('seeds 1–3 land near the production trace statistics (evaluation.md), each and on average', () => {
  const runs = [1, 2, 3].map((seed) => workloadStats(agentic({ seed })));
  const avg = (f: (s: WorkloadStats) => number) => runs.reduce((a, s) => a + f(s), 0) / runs.length;
  const near = (what: string, f: (s: WorkloadStats) => number, target: number, eachWithin: number, meanWithin: number) => {
    for (const [i, s] of runs.entries()) assert.ok(Math.abs(f(s) - target) <= eachWithin, `seed ${i + 1}: ${what} ${f(s)}, want ${target} ± ${eachWithin}`);
    assert.ok(Math.abs(avg(f) - target) <= meanWithin, `seeds 1–3: mean ${what} ${avg(f)}, want ${target} ± ${meanWithin}`);
  };
  for (const s of runs) assert.ok(s.sessions > 250 && s.sessions < 350, `${s.sessions} sessions in 600 s at 0.5/s`);
  near('prompt/output', (s) => s.promptOutputRatio, 75, 75 * 0.1, 75 * 0.05);
  near('mean prompt', (s) => s.meanPrompt, 33600, 33600 * 0.1, 33600 * 0.05);
  near('p99 prompt', (s) => s.p99Prompt, 120000, 120000 * 0.05, 120000 * 0.03);
  near('top 1% share', (s) => s.top1PctTokenShare, 0.465, 0.08, 0.04);
  near('APC bound', (s) => s.reusableShare, 0.803, 0.02, 0.01);
  near('intra-session reuse', (s) => s.reuseSplit.intraSession, 0.93, 0.02, 0.01);
  near('cross-session reuse', (s) => s.reuseSplit.crossSession, 0.06, 0.02, 0.01);
  near('shared-prefix reuse', (s) => s.reuseSplit.sharedPrefix, 0.01, 0.004, 0.002);
  for (const s of runs) {
    // The hits only another session's blocks give are the cross-session and shared-prefix ones: the gap between
    // the two bounds is their share of the hits (why 79.6% intra-session and the 93/6/1 split cannot both hold).
    const gap = s.reusableShare - s.intraSessionShare;
    assert.ok(Math.abs(gap - (s.reuseSplit.crossSession + s.reuseSplit.sharedPrefix) * s.reusableShare) < 1e-9, `gap ${gap}`);
    assert.ok(s.intraSessionShare > 0.7 && s.intraSessionShare < s.reusableShare, `intra-session bound ${s.intraSessionShare}`);
  }
  // Compaction keeps every prompt, with its output, inside the smallest shipped profile's max_model_len (128 Ki).
  for (const seed of [1, 2, 3]) {
    for (const s of agentic({ seed }).sessions) for (const t of s.turns) assert.ok(t.promptTokens <= AGENTIC_DEFAULTS.maxContext && t.promptTokens + t.outputTokens <= 131072);
  }
});

test('a seed makes a run reproducible; another seed gives another run', () => {
  const small = { sessions: 40, seed: 9 };
  const shape = (w: ReturnType<typeof agentic>) => w.sessions.map((s) => [s.start, s.client, s.turns.map((t) => [t.keepBlocks, t.promptTokens, t.outputTokens, t.thinkTime, [...t.newBlocks]])]);
  assert.deepEqual(shape(agentic(small)), shape(agentic(small)));
  assert.notDeepEqual(shape(agentic(small)), shape(agentic({ ...small, seed: 10 })));
});

test('turn k = turn k−1 + its output + a tool result, or a reset to the system prompt; sessions of a client share it', () => {
  const w = agentic({ sessions: 30, clients: 2, forkProbability: 0 });
  const sys = Math.floor(AGENTIC_DEFAULTS.systemTokens / 64);
  const firsts = new Map<string, number[]>();
  let grown = 0, reset = 0;
  for (const s of w.sessions) {
    const p = new SessionPrompt(w.seed, 64);
    s.turns.forEach((t, k) => {
      const before = p.tokens.length;
      const { blocks } = p.advance(t);
      if (k === 0) {
        const f = firsts.get(s.client);
        if (f === undefined) firsts.set(s.client, blocks.slice(0, sys));
        else assert.deepEqual(blocks.slice(0, sys), f);
        assert.ok(blocks.slice(0, sys).every((b) => w.sharedPrefixBlocks.has(b)));
        return;
      }
      assert.ok(t.thinkTime > 0);
      assert.deepEqual(blocks.slice(0, sys), firsts.get(s.client), 'every prompt starts with the system prompt');
      if (t.keepBlocks === Math.floor(before / 64) && t.promptTokens >= before + s.turns[k - 1].outputTokens + 1) grown++;
      else { // compaction or the next task: the system prompt, then new blocks only
        assert.equal(t.keepBlocks, sys);
        assert.ok(t.newBlocks.every((b) => !w.sharedPrefixBlocks.has(b)));
        reset++;
      }
      assert.ok(t.promptTokens <= AGENTIC_DEFAULTS.maxContext);
    });
  }
  assert.ok(grown > 5 * reset && reset > 0, `${grown} grown, ${reset} reset`);
  assert.equal(new Set([...firsts.values()].map((b) => b[0])).size, 2, 'two clients, two system prompts');
});

test('large tool results and the next task: each knob does what it says, and leaves the other draws alone', () => {
  const base = { sessions: 40, forkProbability: 0, maxContext: 1e9 };
  const growth = (w: ReturnType<typeof agentic>) => w.sessions.flatMap((s) => s.turns.slice(1).map((t, k) => t.promptTokens - s.turns[k].promptTokens - s.turns[k].outputTokens));
  const plain = agentic({ ...base, largeToolProbability: 0, newTaskProbability: 0 });
  const large = agentic({ ...base, largeToolProbability: 1, largeToolMedian: 20000, largeToolSigma: 0, newTaskProbability: 0 });
  // Every added tool result grows by 20,000 tokens; turn counts and outputs are the same draws.
  assert.deepEqual(growth(large).map((g, i) => g - growth(plain)[i]), growth(plain).map(() => 20000));
  assert.deepEqual(large.sessions.map((s) => s.turns.map((t) => t.outputTokens)), plain.sessions.map((s) => s.turns.map((t) => t.outputTokens)));
  // With the next task every turn, every later prompt is the system prompt plus a new task message.
  const sys = Math.floor(AGENTIC_DEFAULTS.systemTokens / 64);
  const tasks = agentic({ ...base, newTaskProbability: 1 });
  for (const s of tasks.sessions) for (const t of s.turns.slice(1)) assert.equal(t.keepBlocks, sys);
  assert.throws(() => agentic({ largeToolProbability: 1.5 }), /largeToolProbability must be in \[0, 1\]/);
  assert.throws(() => agentic({ newTaskProbability: -0.1 }), /newTaskProbability must be in \[0, 1\]/);
});

test('options: concurrency arrivals, validation, and the spec loader', () => {
  const w = agentic({ sessions: 5, concurrency: 2 });
  assert.deepEqual(w.arrival, { mode: 'concurrency', n: 2 });
  assert.equal(w.sessions.length, 5);
  assert.throws(() => agentic({ rate: -1 }), /rate must be/);
  assert.throws(() => agentic({ forkProbability: 2 }), /forkProbability/);
  assert.throws(() => loadWorkload('agentic', { nope: 1 }), /unknown option nope/);
  assert.throws(() => loadWorkload('zipf'), /unknown workload/);
  assert.equal(loadWorkload('agentic', { sessions: 3 }).kind, 'closed');
  // Flag strings are coerced to the option's type.
  const fromFlags = loadWorkload('agentic', { sessions: '4', rate: '2', concurrency: '2' });
  assert.equal(fromFlags.kind === 'closed' && fromFlags.sessions.length, 4);
  assert.deepEqual(fromFlags.kind === 'closed' && fromFlags.arrival, { mode: 'concurrency', n: 2 });
  assert.throws(() => loadWorkload('agentic', { rate: 'fast' }), /rate must be a number/);
});
