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
  assert.equal(w.sessions.length, 10);
  assert.deepEqual(w.sessions.map((s) => s.id), [...raw.keys()]);
  for (const [id, j] of raw) {
    const root = byId.get(id) as Session;
    const own = (j.requests as Raw[]).filter((r) => r.type !== 'subagent');
    assert.equal(root.turns.length, own.length, id);
    assert.deepEqual(root.turns.map((t) => t.promptTokens), own.map((r) => r.in), id);
    assert.deepEqual(root.turns.map((t) => t.outputTokens), own.map((r) => Math.max(1, r.out as number)), id);
  }
  const all = [...allSessions(w.sessions)];
  assert.equal(all.reduce((n, s) => n + s.turns.length, 0), 961);
});

test('the five sessions with sub-agents, their children concurrent and joined by the parent', () => {
  const withKids = w.sessions.filter((s) => s.children.length > 0).map((s) => s.id);
  assert.deepEqual(withKids, ['trace_0010', 'trace_0254', 'trace_0276', 'trace_0279', 'trace_0291']);
  const t10 = byId.get('trace_0010') as Session;
  assert.deepEqual(t10.children.map((c) => [c.session.id, c.afterTurn, c.joinBeforeTurn, c.session.turns.length]), [
    ['trace_0010:agent_001', 0, 1, 7], ['trace_0010:agent_002', 8, 9, 5], ['trace_0010:agent_003', 8, 9, 14], ['trace_0010:agent_004', 8, 9, 24]]);
  // Launched ~1 s after turn 8 ends (t − duration_ms), the three run side by side in a replay.
  for (const c of t10.children) assert.ok(c.delay >= 0 && c.delay < 2, `${c.session.id} delay ${c.delay}`);
  const r = replay(w, (s, k) => byId.get(s)!.turns[k].nominalServiceTime);
  const first = (id: string) => r.requests.find((x) => x.id === id)!;
  const s2 = first('trace_0010:agent_002/0'), s3 = first('trace_0010:agent_003/0');
  assert.equal(s2.sent, s3.sent);
  const lastKid = Math.max(...r.requests.filter((x) => x.sessionId.startsWith('trace_0010:agent_00') && x.sessionId !== 'trace_0010:agent_001').map((x) => x.end));
  assert.ok(first('trace_0010/9').sent >= lastKid, 'turn 9 waits for the three sub-agents');
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
  const a = first('trace_0010'), b = first('trace_0578');
  const shared = Math.floor(Math.min(12439 + 4283, 12513 + 2431) / 64);
  assert.deepEqual(a.blocks.slice(0, shared), b.blocks.slice(0, shared));
  assert.ok(a.blocks.slice(0, shared).every((x) => w.sharedPrefixBlocks.has(x)));
  // Both files number their blocks from 1, yet past the shared prompt no block is common.
  const rest = new Set(a.blocks.slice(shared + 1));
  assert.ok(b.blocks.slice(shared + 1).every((x) => !rest.has(x)));
});

test('copies are distinct sessions; arrivals are Poisson or a concurrency; bad input is refused', () => {
  const two = claudeCode(CLAUDE_CODE_DIR, { copies: 2, concurrency: 4 });
  assert.equal(two.sessions.length, 20);
  assert.deepEqual(two.arrival, { mode: 'concurrency', n: 4 });
  assert.equal(new Set(two.sessions.map((s) => s.id)).size, 20);
  const starts = w.sessions.map((s) => s.start);
  assert.ok(starts.every((t, i) => t > 0 && (i === 0 || t > starts[i - 1])));
  assert.throws(() => claudeCode('/nonexistent-dir'), /not a directory/);
  assert.throws(() => claudeCode(CLAUDE_CODE_DIR, { rate: 0 }), /rate must be/);
});
