import { test } from 'node:test';
import assert from 'node:assert/strict';
import { agentic, AGENTIC_DEFAULTS } from '../../../src/eval/workloads/agentic.js';
import { SessionPrompt } from '../../../src/eval/workloads/prompt-builder.js';
import { workloadStats } from '../../../src/eval/workloads/stats.js';
import { loadWorkload } from '../../../src/eval/workloads/index.js';

test('the default seed lands near the production trace statistics (evaluation.md)', () => {
  const w = agentic();
  const s = workloadStats(w);
  assert.ok(s.sessions > 250 && s.sessions < 350, `${s.sessions} sessions in 600 s at 0.5/s`);
  assert.ok(Math.abs(s.promptOutputRatio - 75) < 75 * 0.15, `prompt/output ${s.promptOutputRatio}`);
  assert.ok(Math.abs(s.meanPrompt - 33600) < 33600 * 0.15, `mean prompt ${s.meanPrompt}`);
  assert.ok(Math.abs(s.top1PctTokenShare - 0.465) < 0.1, `top 1% share ${s.top1PctTokenShare}`);
  assert.ok(Math.abs(s.reuseSplit.intraSession - 0.93) < 0.03, `intra ${s.reuseSplit.intraSession}`);
  assert.ok(Math.abs(s.reuseSplit.crossSession - 0.06) < 0.03, `cross ${s.reuseSplit.crossSession}`);
  assert.ok(Math.abs(s.reuseSplit.sharedPrefix - 0.01) < 0.005, `shared ${s.reuseSplit.sharedPrefix}`);
});

test('a seed makes a run reproducible; another seed gives another run', () => {
  const small = { sessions: 40, seed: 9 };
  const shape = (w: ReturnType<typeof agentic>) => w.sessions.map((s) => [s.start, s.client, s.turns.map((t) => [t.keepBlocks, t.promptTokens, t.outputTokens, t.thinkTime, [...t.newBlocks]])]);
  assert.deepEqual(shape(agentic(small)), shape(agentic(small)));
  assert.notDeepEqual(shape(agentic(small)), shape(agentic({ ...small, seed: 10 })));
});

test('turn k = turn k−1 + its output + a tool result; sessions of a client share the system prompt', () => {
  const w = agentic({ sessions: 30, clients: 2, forkProbability: 0 });
  const sys = Math.floor(AGENTIC_DEFAULTS.systemTokens / 64);
  const firsts = new Map<string, number[]>();
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
      } else if (t.promptTokens > before) {
        assert.equal(t.keepBlocks, Math.floor(before / 64));
        assert.ok(t.promptTokens >= before + s.turns[k - 1].outputTokens + 1);
        assert.ok(t.thinkTime > 0);
      } else assert.ok(t.promptTokens <= AGENTIC_DEFAULTS.maxContext, 'compacted');
    });
  }
  assert.equal(new Set([...firsts.values()].map((b) => b[0])).size, 2, 'two clients, two system prompts');
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
