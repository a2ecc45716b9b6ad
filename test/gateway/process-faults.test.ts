// What a real `ear serve` process does with a fault nobody expected (src/request/faults.ts): an unhandled
// rejection and an uncaught exception are logged (the request id where known) and counted, and the process keeps
// serving: it does not exit. The faults are planted by a preloaded module (test/fixtures/fault-trigger.ts).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { metric, simFleet, type SimFleet } from '../fixtures/processes.js';
import { until } from '../fixtures/wait.js';

const trigger = new URL('../fixtures/fault-trigger.js', import.meta.url).href;
let fleet: SimFleet;
before(async () => {
  fleet = await simFleet(['healthIntervalMs: 60000', 'metricsIntervalMs: 0'], () => [['--time-scale', '0.02']], { gatewayEnv: { NODE_OPTIONS: `--import ${trigger}` } });
});
after(async () => { await fleet?.close(); });

test('an unhandled rejection and an uncaught exception are logged with the request id where known, and ear serve serves on', async () => {
  fleet.gateway.child.kill('SIGUSR2');
  await until(() => /injected rejection/.test(fleet.gateway.out()) && /injected exception/.test(fleet.gateway.out()), { what: 'both faults logged' });
  const lines = fleet.gateway.out().split('\n').filter((l) => l.includes('unexpected fault'));
  const rejection = lines.find((l) => l.includes('injected rejection'));
  assert.ok(rejection !== undefined, 'the rejection is logged');
  assert.match(rejection, /"where":"unhandled-rejection"/);
  assert.match(rejection, /"requestId":"req-injected-1"/);
  assert.ok(lines.some((l) => l.includes('injected exception') && l.includes('"where":"uncaught-exception"')), 'the exception is logged');
  assert.equal(fleet.gateway.child.exitCode, null, 'the process did not exit');
  const res = await fetch(`${fleet.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', max_tokens: 4, messages: [{ role: 'user', content: 'still there?' }] })
  });
  assert.equal(res.status, 200, await res.text());
  assert.equal(await metric(fleet.url, 'ear_faults_total', '{where="unhandled-rejection"}'), 1);
  assert.equal(await metric(fleet.url, 'ear_faults_total', '{where="uncaught-exception"}'), 1);
});
