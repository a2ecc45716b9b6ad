import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sessionIdFrom, sessionOf, MAX_SESSION_ID_BYTES } from '../../src/request/session-id.js';

test('the session id comes from EAR\'s header first, then the agent clients\' headers', () => {
  const from = (h: Record<string, string>) => sessionIdFrom((n) => h[n] ?? '');
  assert.equal(from({ 'x-session-id': 'a', 'x-claude-code-session-id': 'b' }), 'a');
  assert.equal(from({ 'x-claude-code-session-id': ' b ' }), 'b');
  assert.equal(from({ session_id: 'codex' }), 'codex');
  assert.equal(from({ 'session-id': 'codex2' }), 'codex2');
  assert.equal(from({ 'x-session-affinity': 'oc' }), 'oc');
  assert.equal(from({ 'x-session-id': '   ' }), null);
  assert.equal(from({ 'x-session-id': 'x'.repeat(1000) })?.length, MAX_SESSION_ID_BYTES);
});

test('a sub-agent\'s parent session comes from EAR\'s header, the common one, or Claude Code\'s agent ids', () => {
  const of = (h: Record<string, string>) => sessionOf((n) => h[n] ?? '');
  assert.deepEqual(of({ 'x-session-id': 'c', 'x-ear-parent-session-id': 'p' }), { sessionId: 'c', parentSessionId: 'p' });
  assert.deepEqual(of({ 'x-session-id': 'c', 'x-parent-session-id': 'p' }), { sessionId: 'c', parentSessionId: 'p' });
  assert.deepEqual(of({ 'x-session-id': 'c' }), { sessionId: 'c', parentSessionId: null });
  // Claude Code sends the parent's session id on a sub-agent's turns and names the agents apart.
  assert.deepEqual(of({ 'x-claude-code-session-id': 's' }), { sessionId: 's', parentSessionId: null });
  assert.deepEqual(of({ 'x-claude-code-session-id': 's', 'x-claude-code-agent-id': 'a1' }), { sessionId: 's:a1', parentSessionId: 's' });
  assert.deepEqual(of({ 'x-claude-code-session-id': 's', 'x-claude-code-agent-id': 'a2', 'x-claude-code-parent-agent-id': 'a1' }), { sessionId: 's:a2', parentSessionId: 's:a1' });
  assert.equal(of({ 'x-session-id': 'c', 'x-parent-session-id': 'p'.repeat(1000) }).parentSessionId!.length, MAX_SESSION_ID_BYTES);
});
