import { test } from 'node:test';
import assert from 'node:assert/strict';
import { textRequest, ANTHROPIC_VERSION } from '../../../src/eval/drivers/api-requests.js';
import { sessionOf } from '../../../src/request/session-id.js';
import { anthropicToChat } from '../../../src/dialects/anthropic-request.js';
import { responsesToChat } from '../../../src/dialects/responses-request.js';
import type { ConversationTurn } from '../../../src/eval/workloads/conversation.js';

const conversation: ConversationTurn = {
  turn: 1,
  system: 'SYSTEM',
  messages: [
    { role: 'user', text: 'first', start: 6, end: 11 },
    { role: 'assistant', text: 'answer', start: 11, end: 17 },
    { role: 'user', text: 'second', start: 17, end: 23 }
  ]
};
const turn = (sessionId: string, parentId: string | null) => ({ model: 'm', conversation, maxTokens: 7, sessionId, rootSessionId: 'trace_1', parentId });
const header = (h: Record<string, string>) => (name: string) => h[name] ?? '';

test('messages: Claude Code\'s path and headers; the gateway reads the workload\'s session and parent from them', () => {
  const root = textRequest('messages', turn('trace_1', null));
  assert.equal(root.path, '/v1/messages?beta=true');
  assert.equal(root.headers['anthropic-version'], ANTHROPIC_VERSION);
  assert.deepEqual(sessionOf(header(root.headers)), { sessionId: 'trace_1', parentSessionId: null });
  const child = textRequest('messages', turn('trace_1:agent_001', 'trace_1'));
  assert.equal(child.headers['x-claude-code-session-id'], 'trace_1', 'Claude Code names the root session on a sub-agent\'s turns');
  assert.deepEqual(sessionOf(header(child.headers)), { sessionId: 'trace_1:agent_001', parentSessionId: 'trace_1' });
  const grandchild = textRequest('messages', turn('trace_1:agent_001:agent_009', 'trace_1:agent_001'));
  assert.deepEqual(sessionOf(header(grandchild.headers)), { sessionId: 'trace_1:agent_001:agent_009', parentSessionId: 'trace_1:agent_001' });
});

test('messages: the body is the conversation as vLLM converts it, the system prompt first, the root session as user', () => {
  const r = textRequest('messages', turn('trace_1', null));
  const body = JSON.parse(r.body);
  assert.equal(body.stream, true);
  assert.equal(body.max_tokens, 7);
  assert.deepEqual(body.system, [{ type: 'text', text: 'SYSTEM', cache_control: { type: 'ephemeral' } }]);
  const chat = anthropicToChat(body);
  assert.deepEqual(chat.messages, [
    { role: 'system', content: 'SYSTEM' }, { role: 'user', content: 'first' }, { role: 'assistant', content: 'answer' }, { role: 'user', content: 'second' }
  ]);
  assert.equal(chat.user, 'trace_1');
});

test('responses: Codex\'s session-id header; instructions and input items as vLLM converts them; chat: a system message', () => {
  const r = textRequest('responses', turn('trace_1:agent_001', 'trace_1'));
  assert.equal(r.path, '/v1/responses');
  assert.deepEqual(sessionOf(header(r.headers)), { sessionId: 'trace_1:agent_001', parentSessionId: null });
  const body = JSON.parse(r.body);
  assert.equal(body.store, false);
  assert.equal(body.max_output_tokens, 7);
  const chat = responsesToChat(body);
  assert.equal(chat.instructions, 'SYSTEM');
  assert.deepEqual(chat.messages.map((m) => [m.role, typeof m.content === 'string' ? m.content : (m.content as Array<{ text: string }>)[0].text]),
    [['system', 'SYSTEM'], ['user', 'first'], ['assistant', 'answer'], ['user', 'second']]);
  const c = textRequest('chat', turn('trace_1', null));
  assert.equal(c.path, '/v1/chat/completions');
  assert.deepEqual(JSON.parse(c.body).messages, [
    { role: 'system', content: 'SYSTEM' }, { role: 'user', content: 'first' }, { role: 'assistant', content: 'answer' }, { role: 'user', content: 'second' }
  ]);
  assert.deepEqual(sessionOf(header(c.headers)), { sessionId: 'trace_1', parentSessionId: null });
});
