// `ear serve` started with V8's heap flags on node's command line (as the Dockerfile's NODE_OPTIONS and `npm start`
// set --max-semi-space-size): worker threads refuse those flags in their execArgv, and the route pool's threads
// were given the process's own, so the gateway did not start. A body past the inline bound goes to the pool.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SERVE_LISTENING, start, stop } from '../fixtures/processes.js';

test('ear serve under node --max-old-space-size --max-semi-space-size computes a large body\'s features in the route pool', { timeout: 60_000 }, async () => {
  const gw = await start(['serve', '--demo', '1', '--host', '127.0.0.1', '--port', '0'], SERVE_LISTENING, ['--max-old-space-size=512', '--max-semi-space-size=32']);
  let answered = false;
  try {
    const models = await (await fetch(`${gw.url}/v1/models`)).json() as { data: Array<{ id: string }> };
    const model = models.data[0].id;
    const content = 'the route pool hashes this '.repeat(2000); // 54 KB: past every inline bound
    const r = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content }], max_tokens: 2 }),
      signal: AbortSignal.timeout(20_000)
    });
    const body = await r.text();
    assert.equal(r.status, 200, body);
    assert.match(body, /"usage":\{"prompt_tokens":\d{4,}/);
    answered = true;
  } finally {
    // A gateway that failed here may not drain: it is killed.
    const code = await stop(gw, answered ? 'SIGTERM' : 'SIGKILL');
    if (answered) assert.equal(code, 0, gw.out());
  }
});
