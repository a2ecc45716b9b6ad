// Refusals on the API routes (issue 28, finding 6), through `ear serve` in front of an `ear sim`: a route taken
// with another method is a 405 with an Allow header (RFC 9110 §15.5.6), and every refusal on an API's routes is
// in that API's shape: Anthropic's {"type":"error",…} on /v1/messages and below (it was OpenAI's, with no Allow).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { simFleet, type SimFleet } from '../fixtures/processes.js';

let f: SimFleet;
before(async () => { f = await simFleet(['apiKeys: [sk-m]'], () => [['--time-scale', '0']]); });
after(async () => { await f?.close(); });

async function call (method: string, path: string, key = 'sk-m'): Promise<{ status: number; allow: string | null; body: Record<string, any> }> {
  const res = await fetch(`${f.url}${path}`, { method, headers: { 'x-api-key': key, authorization: `Bearer ${key}` } });
  const text = await res.text();
  return { status: res.status, allow: res.headers.get('allow'), body: method === 'HEAD' ? {} : JSON.parse(text) };
}

test('a route taken with another method: 405 with Allow, in Anthropic\'s shape on the Messages routes', async () => {
  for (const path of ['/v1/messages', '/v1/messages/count_tokens']) {
    for (const method of ['GET', 'PUT', 'DELETE', 'PATCH']) {
      const r = await call(method, path);
      assert.equal(r.status, 405, `${method} ${path}`);
      assert.equal(r.allow, 'POST', `${method} ${path}`);
      assert.equal(r.body.type, 'error', `${method} ${path}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.type, 'invalid_request_error');
      assert.match(r.body.error.message, /is not allowed/);
    }
  }
});

test('405 with Allow in OpenAI\'s shape (Responses\' too) on the other routes', async () => {
  const cases: Array<[string, string, string]> = [
    ['GET', '/v1/responses', 'POST'], ['GET', '/v1/chat/completions', 'POST'], ['PUT', '/v1/completions', 'POST'], ['GET', '/v1/context', 'POST'],
    ['PUT', '/v1/context/ctx-1', 'GET, DELETE'], ['POST', '/v1/models', 'GET'], ['POST', '/health', 'GET'], ['GET', '/', 'HEAD']
  ];
  for (const [method, path, allow] of cases) {
    const r = await call(method, path);
    assert.equal(r.status, 405, `${method} ${path}`);
    assert.equal(r.allow, allow, `${method} ${path}`);
    assert.equal(r.body.error.type, 'invalid_request_error', `${method} ${path}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.code, 'EAR_ERR_METHOD');
  }
});

test('no route below /v1/messages is a 404 in Anthropic\'s shape (the SDK\'s NotFoundError), elsewhere OpenAI\'s; a 404 has no Allow', async () => {
  const anthropic = new Anthropic({ baseURL: f.url, apiKey: 'sk-m', maxRetries: 0 });
  // Message batches: an Anthropic route EAR does not serve.
  await assert.rejects(anthropic.messages.batches.retrieve('msgbatch_1'), (e: unknown) => {
    assert.ok(e instanceof Anthropic.NotFoundError, String(e));
    assert.deepEqual(Object.keys(e.error as object).sort(), ['error', 'type']);
    assert.equal((e.error as { error: { type: string } }).error.type, 'not_found_error');
    return true;
  });
  const other = await call('POST', '/v1/nothing');
  assert.equal(other.status, 404);
  assert.equal(other.allow, null);
  assert.equal(other.body.error.code, 'EAR_ERR_NOT_FOUND');
});

test('a wrong key on the Messages routes is refused in Anthropic\'s shape (the SDK\'s AuthenticationError)', async () => {
  const anthropic = new Anthropic({ baseURL: f.url, apiKey: 'sk-wrong', maxRetries: 0 });
  await assert.rejects(anthropic.messages.countTokens({ model: 'm', messages: [{ role: 'user', content: 'x' }] }), (e: unknown) => {
    assert.ok(e instanceof Anthropic.AuthenticationError, String(e));
    assert.equal((e.error as { type: string }).type, 'error');
    return true;
  });
});
