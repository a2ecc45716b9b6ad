import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { claudeCode } from '../../../src/eval/workloads/claude-code.js';
import { SessionPrompt } from '../../../src/eval/workloads/prompt-builder.js';
import { replay } from '../../../src/eval/workloads/replay.js';
import { allSessions, type Session } from '../../../src/eval/workloads/types.js';
import { CLAUDE_CODE_DIR } from '../traces.js';

interface Raw { type: string; in?: number; out?: number; think_time?: number; requests?: Raw[] }
const files = readdirSync(CLAUDE_CODE_DIR).filter((f) => f.endsWith('.json')).sort();
const raw = new Map(files.map((f) => [f.replace('.json', ''), JSON.parse(readFileSync(join(CLAUDE_CODE_DIR, f), 'utf8'))]));
const w = claudeCode(CLAUDE_CODE_DIR, { seed: 5 });
const byId = new Map([...allSessions(w.sessions)].map((s) => [s.id, s]));

test('one root session per file, every turn of the file and of its sub-agents, in order', () => {
  assert.equal(w.sessions.length, 3);
  assert.deepEqual(w.sessions.map((s) => s.id), [...raw.keys()]);
  for (const [id, j] of raw) {
    const root = byId.get(id) as Session;
    const own = (j.requests as Raw[]).filter((r) => r.type !== 'subagent');
    assert.equal(root.turns.length, own.length, id);
    assert.deepEqual(root.turns.map((t) => t.promptTokens), own.map((r) => r.in), id);
    assert.deepEqual(root.turns.map((t) => t.outputTokens), own.map((r) => Math.max(1, r.out as number)), id);
  }
  const all = [...allSessions(w.sessions)];
  assert.equal(all.reduce((n, s) => n + s.turns.length, 0), 20 + 5 + 7 + 14 + 22); // trace_0291 and its two sub-agents, 0517, 0616
});

test('the session with sub-agents, its children concurrent and joined by the parent', () => {
  const withKids = w.sessions.filter((s) => s.children.length > 0).map((s) => s.id);
  assert.deepEqual(withKids, ['trace_0291']);
  const t291 = byId.get('trace_0291') as Session;
  assert.deepEqual(t291.children.map((c) => [c.session.id, c.afterTurn, c.joinBeforeTurn, c.session.turns.length]), [
    ['trace_0291:agent_001', 15, 16, 5], ['trace_0291:agent_002', 15, 16, 7]]);
  // Launched under a second after turn 15 ends (t − duration_ms), the two run side by side in a replay.
  for (const c of t291.children) assert.ok(c.delay >= 0 && c.delay < 2, `${c.session.id} delay ${c.delay}`);
  const r = replay(w, (s, k) => byId.get(s)!.turns[k].nominalServiceTime);
  const first = (id: string) => r.requests.find((x) => x.id === id)!;
  const s1 = first('trace_0291:agent_001/0'), s2 = first('trace_0291:agent_002/0');
  assert.ok(Math.abs(s1.sent - s2.sent) < 0.05, `${s1.sent} vs ${s2.sent}`);
  const lastKid = Math.max(...r.requests.filter((x) => x.sessionId.startsWith('trace_0291:agent_00')).map((x) => x.end));
  assert.ok(s1.end < lastKid || s2.end < lastKid, 'the two overlap');
  assert.ok(first('trace_0291/16').sent >= lastKid, 'turn 16 waits for both sub-agents');
});

test('prompts expand to their recorded length; a turn shares its kept blocks with the previous one', () => {
  const s = byId.get('trace_0291') as Session;
  const p = new SessionPrompt(w.seed, 64);
  let prev: Uint32Array = new Uint32Array(0);
  for (const t of s.turns) {
    const { tokens } = p.advance(t);
    assert.equal(tokens.length, t.promptTokens);
    assert.deepEqual(tokens.slice(0, t.keepBlocks * 64), prev.slice(0, t.keepBlocks * 64));
    prev = tokens;
  }
  assert.ok(s.turns.slice(1).every((t) => t.keepBlocks > 0), 'every later turn reuses the session prefix');
});

test('the system + tool prompt is one block sequence common to all sessions; the rest is local to a session', () => {
  const first = (id: string) => new SessionPrompt(w.seed, 64).advance((byId.get(id) as Session).turns[0]);
  const a = first('trace_0291'), b = first('trace_0616');
  const shared = Math.floor(Math.min(12166 + 3318, 12784 + 3132) / 64); // tool_tokens + system_tokens of each file
  assert.deepEqual(a.blocks.slice(0, shared), b.blocks.slice(0, shared));
  assert.ok(a.blocks.slice(0, shared).every((x) => w.sharedPrefixBlocks.has(x)));
  // Both files number their blocks from 1, yet past the shared prompt no block is common.
  const rest = new Set(a.blocks.slice(shared + 1));
  assert.ok(b.blocks.slice(shared + 1).every((x) => !rest.has(x)));
});

test('copies are distinct sessions; arrivals are Poisson or a concurrency; bad input is refused', () => {
  const two = claudeCode(CLAUDE_CODE_DIR, { copies: 2, concurrency: 4 });
  assert.equal(two.sessions.length, 6);
  assert.deepEqual(two.arrival, { mode: 'concurrency', n: 4 });
  assert.equal(new Set(two.sessions.map((s) => s.id)).size, 6);
  const starts = w.sessions.map((s) => s.start);
  assert.ok(starts.every((t, i) => t > 0 && (i === 0 || t > starts[i - 1])));
  assert.throws(() => claudeCode('/nonexistent-dir'), /not a directory/);
  assert.throws(() => claudeCode(CLAUDE_CODE_DIR, { rate: 0 }), /rate must be/);
});
