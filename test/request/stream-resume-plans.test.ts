// Each API's resume plan for a cut stream (src/resume/): what is refused (a tool call's arguments), what only
// lacked its terminal event, and how the next engine's events are rewritten where the SDK tests cannot reach
// (the sims never call a tool): a Messages stream cut between blocks, or with a text block open when the next
// engine starts with a tool_use block.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resumeFor } from '../../src/resume/resume-dialects.js';
import { parseEvents, SpliceStream, type ResumePlan } from '../../src/resume/stream-resume.js';

const anthropic = (type: string, doc: Record<string, unknown>): string => `event: ${type}\ndata: ${JSON.stringify({ type, ...doc })}\n\n`;
const messagesBody = { model: 'm', max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'hi' }] };

function plan (endpoint: 'chat' | 'messages' | 'responses' | 'completions', body: Record<string, unknown>, sse: string): ResumePlan {
  return resumeFor(endpoint)!.plan(body, parseEvents(sse));
}

function spliced (p: ResumePlan, sse: string): Array<Record<string, unknown> & { event: string | null }> {
  assert.equal(p.kind, 'resume');
  if (p.kind !== 'resume') return [];
  const out = new SpliceStream(p.splice).push(Buffer.from(sse));
  return parseEvents(out).map((e) => ({ event: e.event, ...JSON.parse(e.data) }));
}

test('chat: cut in a tool call is refused as tool_call; a finish_reason already sent (tool calls included) only lacks [DONE]', () => {
  const tool = 'data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{"}}]}}]}\n\n';
  const p = plan('chat', { messages: [] }, tool);
  assert.equal(p.kind, 'refuse');
  assert.equal(p.kind === 'refuse' && p.reason, 'tool_call');
  const done = plan('chat', { messages: [] }, 'data: {"id":"c","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]}\n\n');
  assert.deepEqual(done, { kind: 'finish', tail: 'data: [DONE]\n\n' });
  // Tool calls whole (finish_reason tool_calls came): the turn is complete, not cut in a tool call.
  const called = plan('chat', { messages: [] }, tool + 'data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n');
  assert.deepEqual(called, { kind: 'finish', tail: 'data: [DONE]\n\n' });
  const two = plan('chat', { messages: [], n: 2 }, 'data: {"id":"c","choices":[{"index":0,"delta":{"content":"a"}}]}\n\n');
  assert.equal(two.kind === 'refuse' && two.reason, 'unsupported');
});

test('completions: the prompt plus the text so far, max_tokens less the tokens sent', () => {
  const p = plan('completions', { model: 'm', prompt: 'Once', max_tokens: 10, stream: true }, 'data: {"id":"cmpl-1","created":5,"choices":[{"index":0,"text":" upon"}]}\n\ndata: {"id":"cmpl-1","created":5,"choices":[{"index":0,"text":" a"}]}\n\n');
  assert.equal(p.kind, 'resume');
  const body = p.kind === 'resume' ? JSON.parse(p.body.toString()) : null;
  assert.equal(body.prompt, 'Once upon a');
  assert.equal(body.max_tokens, 8);
  const out = spliced(p, 'data: {"id":"cmpl-9","created":9,"choices":[{"index":0,"text":" time"}]}\n\ndata: {"id":"cmpl-9","created":9,"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":8,"total_tokens":12}}\n\n');
  assert.deepEqual(out.map((c) => [c.id, c.created]), [['cmpl-1', 5], ['cmpl-1', 5]]);
  assert.deepEqual(out[1].usage, { prompt_tokens: 2, completion_tokens: 10, total_tokens: 12 });
});

test('Messages: cut inside a tool_use block\'s input is refused; after message_delta only message_stop is written', () => {
  const start = anthropic('message_start', { message: { id: 'msg_1', usage: { input_tokens: 7, output_tokens: 0 } } });
  const inTool = start + anthropic('content_block_start', { index: 0, content_block: { type: 'tool_use', id: 't1', name: 'read', input: {} } }) +
    anthropic('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: '{"pa' } });
  const p = plan('messages', messagesBody, inTool);
  assert.equal(p.kind === 'refuse' && p.reason, 'tool_call');
  const ended = start + anthropic('message_delta', { delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 3 } });
  assert.equal(plan('messages', messagesBody, ended).kind, 'finish');
});

test('Messages: a finished tool_use block goes into the prefill; the next engine\'s blocks are numbered after the client\'s', () => {
  const sse = anthropic('message_start', { message: { id: 'msg_1', usage: { input_tokens: 7, output_tokens: 0 } } }) +
    anthropic('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }) +
    anthropic('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Let me look.' } }) +
    anthropic('content_block_stop', { index: 0 }) +
    anthropic('content_block_start', { index: 1, content_block: { type: 'tool_use', id: 't1', name: 'read', input: {} } }) +
    anthropic('content_block_delta', { index: 1, delta: { type: 'input_json_delta', partial_json: '{"path":"a"}' } }) +
    anthropic('content_block_stop', { index: 1 });
  const p = plan('messages', messagesBody, sse);
  assert.equal(p.kind, 'resume');
  const body = p.kind === 'resume' ? JSON.parse(p.body.toString()) : null;
  assert.deepEqual(body.messages[1], { role: 'assistant', content: [{ type: 'text', text: 'Let me look.' }, { type: 'tool_use', id: 't1', name: 'read', input: { path: 'a' } }] });
  assert.equal(body.max_tokens, 98);
  const out = spliced(p, anthropic('message_start', { message: { id: 'msg_2', usage: { input_tokens: 20, output_tokens: 0 } } }) +
    anthropic('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }) +
    anthropic('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Done.' } }) +
    anthropic('content_block_stop', { index: 0 }) +
    anthropic('message_delta', { delta: { stop_reason: 'end_turn' }, usage: { input_tokens: 20, output_tokens: 1 } }) +
    anthropic('message_stop', {}));
  assert.deepEqual(out.map((e) => [e.type, e.index]), [['content_block_start', 2], ['content_block_delta', 2], ['content_block_stop', 2], ['message_delta', undefined], ['message_stop', undefined]]);
  assert.deepEqual(out[3].usage, { input_tokens: 7, output_tokens: 3 });
});

test('Messages: a text block left open is closed when the next engine starts with a tool_use block', () => {
  const sse = anthropic('message_start', { message: { id: 'msg_1', usage: { input_tokens: 7, output_tokens: 0 } } }) +
    anthropic('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }) +
    anthropic('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Let me' } });
  const out = spliced(plan('messages', messagesBody, sse),
    anthropic('content_block_start', { index: 0, content_block: { type: 'tool_use', id: 't1', name: 'read', input: {} } }) +
    anthropic('content_block_stop', { index: 0 }));
  assert.deepEqual(out.map((e) => [e.type, e.index]), [['content_block_stop', 0], ['content_block_start', 1], ['content_block_stop', 1]]);
});

test('Responses: a function call cut in its arguments is refused; previous_response_id is not resumed', () => {
  const created = 'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1"}}\n\n';
  const fn = created + 'event: response.output_item.added\ndata: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"fc_1","type":"function_call"}}\n\n';
  const p = plan('responses', { input: 'hi' }, fn);
  assert.equal(p.kind === 'refuse' && p.reason, 'tool_call');
  const prev = plan('responses', { input: 'hi', previous_response_id: 'resp_0' }, created);
  assert.equal(prev.kind === 'refuse' && prev.reason, 'unsupported');
});

test('the transcript: past maxResumeBytes it keeps nothing to resume from, and still sees whether the stream ended', async () => {
  const { StreamTranscript } = await import('../../src/resume/transcript.js');
  const t = new StreamTranscript(resumeFor('chat')!, 100);
  t.add(Buffer.from('data: {"id":"c","choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'));
  assert.equal(t.events().length, 1);
  assert.equal(t.ended(), false);
  t.add(Buffer.from('data: {"id":"c","choices":[{"index":0,"delta":{"content":"b"}}]}\n\n'));
  assert.equal(t.overflowed, true);
  assert.deepEqual(t.events(), []);
  t.add(Buffer.from('data: [DONE]\n\n'));
  assert.equal(t.ended(), true);
});
