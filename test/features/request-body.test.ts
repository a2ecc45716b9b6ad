import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { parseRequestBody } from '../../src/features/request-body.js';
import { EarError } from '../../src/errors/errors.js';

const buf = (o: unknown) => Buffer.from(typeof o === 'string' ? o : JSON.stringify(o));

test('chat and completions bodies yield the routing fields; the client\'s bytes are forwarded untouched', () => {
  const raw = buf({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true, max_tokens: 5 });
  const r = parseRequestBody('chat', raw);
  assert.equal(r.model, 'm');
  assert.equal(r.stream, true);
  assert.equal(r.maxTokens, 5);
  assert.equal(r.forward, raw);
  const c = parseRequestBody('completions', buf({ model: 'm', prompt: [1, 2, 3] }));
  assert.deepEqual(c.prompt, [1, 2, 3]);
  assert.equal(c.stream, false);
  assert.equal(parseRequestBody('completions', buf({ model: 'm', prompt: ['a', 'b'] })).prompt, null);
});

test('the OpenAI user field: a string, absent, null or empty is no user', () => {
  assert.equal(parseRequestBody('chat', buf({ model: 'm', messages: [{ role: 'user' }], user: 'alice' })).user, 'alice');
  assert.equal(parseRequestBody('completions', buf({ model: 'm', prompt: 'x', user: 'bob' })).user, 'bob');
  assert.equal(parseRequestBody('chat', buf({ model: 'm', messages: [{ role: 'user' }] })).user, null);
  assert.equal(parseRequestBody('chat', buf({ model: 'm', messages: [{ role: 'user' }], user: null })).user, null);
  assert.equal(parseRequestBody('chat', buf({ model: 'm', messages: [{ role: 'user' }], user: '' })).user, null);
});

test('client kv_transfer_params are stripped before forwarding', () => {
  const r = parseRequestBody('completions', buf({ model: 'm', prompt: 'x', kv_transfer_params: { do_remote_prefill: true, remote_host: 'evil' } }));
  assert.equal('kv_transfer_params' in JSON.parse(r.forward.toString()), false);
});

test('malformed bodies are 400s that say what is wrong', () => {
  const cases: Array<[string, unknown, RegExp, string]> = [
    ['chat', '{"model":', /not valid JSON/, 'EAR_ERR_BAD_JSON'],
    ['chat', [1], /must be a JSON object/, 'EAR_ERR_BAD_REQUEST'],
    ['chat', { messages: [{ role: 'user' }] }, /"model" is required/, 'EAR_ERR_BAD_REQUEST'],
    ['chat', { model: 'm', messages: [] }, /"messages" must be a non-empty array/, 'EAR_ERR_BAD_REQUEST'],
    ['chat', { model: 'm', messages: [{ content: 'x' }] }, /messages\[0\] must be an object/, 'EAR_ERR_BAD_REQUEST'],
    ['chat', { model: 'm', messages: [{ role: 'u' }], stream: 'yes' }, /"stream" must be a boolean/, 'EAR_ERR_BAD_REQUEST'],
    ['chat', { model: 'm', messages: [{ role: 'u' }], max_tokens: -1 }, /"max_tokens"/, 'EAR_ERR_BAD_REQUEST'],
    ['completions', { model: 'm', prompt: [1.5] }, /"prompt" must be/, 'EAR_ERR_BAD_REQUEST'],
    ['completions', { model: 'm' }, /"prompt" must be/, 'EAR_ERR_BAD_REQUEST'],
    ['chat', { model: 'm', messages: [{ role: 'u' }], user: 42 }, /"user" must be a string/, 'EAR_ERR_BAD_REQUEST'],
    ['completions', { model: 'm', prompt: 'x', user: { id: 'a' } }, /"user" must be a string/, 'EAR_ERR_BAD_REQUEST']
  ];
  for (const [ep, body, re, code] of cases) {
    assert.throws(() => parseRequestBody(ep as 'chat', buf(body)), (e: unknown) => e instanceof EarError && e.status === 400 && e.code === code && re.test(e.message), String(re));
  }
});

test('arbitrary bytes never throw anything but a 400 EarError (property)', () => {
  fc.assert(fc.property(fc.uint8Array({ maxLength: 200 }), fc.constantFrom('chat', 'completions'), (bytes, ep) => {
    try {
      parseRequestBody(ep as 'chat', Buffer.from(bytes));
    } catch (e) {
      assert.ok(e instanceof EarError && e.status === 400);
    }
  }));
});
