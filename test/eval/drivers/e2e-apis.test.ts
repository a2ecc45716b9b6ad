import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runE2e, type E2eRequestRecord } from '../../../src/eval/drivers/e2e.js';
import { allSessions, loadWorkload, type ClosedLoopWorkload, type Session } from '../../../src/eval/workloads/index.js';
import { CLAUDE_CODE_DIR } from '../traces.js';

/** Each session's first `n` turns (sub-agents launched later are dropped): a window of turns, the same on every
 *  machine, where a window of workload seconds holds as many turns as the machine finishes in it. */
function firstTurns (w: ClosedLoopWorkload, n: number): ClosedLoopWorkload {
  const cut = (s: Session): Session => ({
    ...s,
    turns: s.turns.slice(0, n),
    children: s.children.filter((c) => c.afterTurn < n).map((c) => ({ ...c, joinBeforeTurn: c.joinBeforeTurn !== null && c.joinBeforeTurn < n ? c.joinBeforeTurn : null, session: cut(c.session) }))
  });
  return { ...w, sessions: w.sessions.map(cut) };
}

// The claude-code fixture through the gateway over the agents' APIs: the first 4 turns of each of its three
// sessions (prompts up to 240k tokens) at 1/50 of real time, two engines, sticky routing. Every turn of the
// window is awaited, so what is asserted does not depend on how fast the machine runs.
for (const api of ['messages', 'responses'] as const) {
  test(`e2e over ${api}: the claude-code traces are served, first tokens seen, a session stays on its engine and its cache grows turn by turn`, async () => {
    const all = loadWorkload(`claude-code:${CLAUDE_CODE_DIR}`, { rate: 1 });
    if (all.kind !== 'closed') throw new Error('claude-code is a closed loop');
    const w = firstTurns(all, 4);
    const turns = [...allSessions(w.sessions)].reduce((n, x) => n + x.turns.length, 0);
    // The turns that keep every full block of the previous prompt: an agent's next turn, sent as an extension.
    const extending = new Set<string>();
    for (const session of allSessions(w.sessions)) {
      session.turns.forEach((t, k) => {
        const prev = k > 0 ? session.turns[k - 1].promptTokens : 0;
        if (k > 0 && t.keepBlocks * w.blockSize >= Math.floor(prev / w.blockSize) * w.blockSize) extending.add(`${session.id}/${k}`);
      });
    }
    const done: E2eRequestRecord[] = [];
    const r = await runE2e({ workload: w, policy: 'sticky', engines: 2, profile: 'h20-qwen3-coder', seed: 1, timeScale: 0.02, api, onRequestDone: (x) => done.push(x) });
    const s = r.summary;
    // Every turn of the window was sent and served.
    assert.equal(s.requests.failed, 0, JSON.stringify(s.failures));
    assert.equal(s.requests.sent, turns);
    assert.equal(s.requests.completed, turns);
    assert.equal(done.length, s.requests.completed);
    assert.equal(s.ttft.count, s.requests.completed);
    for (const x of done) {
      assert.ok(x.firstTokenSeen, `${x.sessionId}/${x.turn}: no generated text in the stream`);
      assert.ok(x.outputTokens >= 1);
      // The engine's prompt is the workload's text re-tokenized in the chat template: close to, not exactly, its length.
      assert.ok(x.promptTokens !== null && Math.abs(x.promptTokens / x.workloadPromptTokens - 1) < 0.15, `${x.sessionId}/${x.turn}: ${x.promptTokens} vs ${x.workloadPromptTokens}`);
    }
    const bySession = new Map<string, E2eRequestRecord[]>();
    for (const x of done) bySession.set(x.sessionId, [...(bySession.get(x.sessionId) ?? []), x]);
    let grown = 0;
    for (const [id, turns] of bySession) {
      turns.sort((a, b) => a.turn - b.turn);
      assert.equal(new Set(turns.map((x) => x.backend)).size, 1, `${id} moved between engines under sticky: ${turns.map((x) => x.backend).join(',')}`);
      assert.ok(turns[0].backend !== null && /^engine-[01]$/.test(turns[0].backend), `${id} on ${turns[0].backend}`);
      // A turn that extends the previous one finds at least that whole prompt in the cache (to the engine's
      // 16-token block), so the cached tokens grow with every such turn.
      for (let k = 1; k < turns.length; k++) {
        const prev = turns[k - 1];
        assert.equal(turns[k].turn, prev.turn + 1);
        if (!extending.has(`${id}/${turns[k].turn}`)) continue;
        assert.ok(turns[k].cachedTokens > prev.cachedTokens, `${id}/${k}: ${turns[k].cachedTokens} cached after ${prev.cachedTokens}`);
        assert.ok(turns[k].cachedTokens >= Math.floor(prev.promptTokens! / 16) * 16, `${id}/${k}: ${turns[k].cachedTokens} cached of the previous ${prev.promptTokens}`);
        grown++;
      }
    }
    // Every extending turn of the window was checked.
    assert.equal(grown, extending.size);
    assert.ok(grown >= 6, `${grown} extending turns checked`);
    // The APC is the engine's cached over the engine's prompt tokens; the bound (one infinite cache) is taken on
    // the workload's blocks of the same completed turns. Sticky routing on engines with room for the window reaches
    // it but for the re-tokenized text's edges (0.72 of 0.73 here); the window's reuse is above a half.
    assert.equal(s.apc.promptTokens, done.reduce((n, x) => n + x.promptTokens!, 0));
    assert.ok(s.apc.bound !== null && s.apc.value >= 0.9 * s.apc.bound, `APC ${s.apc.value}, bound ${s.apc.bound}`);
    assert.ok(s.apc.value > 0.5, `APC ${s.apc.value}`);
  });
}

test('ear eval --driver e2e --api chat runs the agentic workload as chat conversations and records the API; a bad --api is refused', () => {
  const out = mkdtempSync(join(tmpdir(), 'ear-eval-api-'));
  const bin = new URL('../../../src/cli/ear.js', import.meta.url).pathname;
  const ok = spawnSync(process.execPath, [bin, 'eval', '--driver', 'e2e', '--api', 'chat', '--duration', '10', '--set', 'rate=0.4', '--engines', '2',
    '--policies', 'sticky', '--time-scale', '0.05', '--profile', 'h100-llama-3.1-8b', '--no-plots', '--out', out], { encoding: 'utf8' });
  assert.equal(ok.status, 0, ok.stderr);
  const results = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8'));
  assert.equal(results.config.api, 'chat');
  const m = results.policies[0].metrics;
  assert.ok(m.requests.sent > 0);
  assert.equal(m.requests.completed, m.requests.sent, JSON.stringify(m.failures));
  assert.ok(m.apc.value > 0.3, `APC ${m.apc.value}`);
  const bad = spawnSync(process.execPath, [bin, 'eval', '--driver', 'e2e', '--api', 'grpc'], { encoding: 'utf8' });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--api must be one of completions, chat, messages, responses/);
  const des = spawnSync(process.execPath, [bin, 'eval', '--api', 'messages'], { encoding: 'utf8' });
  assert.equal(des.status, 2);
  assert.match(des.stderr, /--api takes effect with --driver e2e only/);
});
