// The lab in precise mode: the engines' KV events reach the routing's prefix index through the gateway's
// decode and apply path, and the run says so; deterministic like the approximate lab.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runDes } from '../../../src/eval/drivers/des.js';
import { loadWorkload } from '../../../src/eval/workloads/index.js';

test('des --set kvEvents=precise: engine events fill the index, the run is deterministic and complete', () => {
  const w = loadWorkload('agentic', { sessions: 8, rate: 0.5, seed: 5 });
  const run = (kvEvents: 'approximate' | 'precise') => runDes({ workload: w, policy: 'prefix-cache', engines: 3, profile: 'h20-qwen3-coder', seed: 3, kvEvents, numGpuBlocks: 6000 });
  const a = run('precise');
  const b = run('precise');
  const strip = (s: typeof a.summary) => ({ ...s, gateway: null });
  assert.deepEqual(strip(a.summary), strip(b.summary));
  assert.equal(a.kvEvents.mode, 'precise');
  const f = a.kvEvents.feed!;
  assert.ok(f.batches > 0 && f.blocksStored > 0, `events applied: ${JSON.stringify({ batches: f.batches, stored: f.blocksStored })}`);
  assert.equal(f.decodeErrors, 0);
  assert.equal(f.unplaceable, 0);
  assert.equal(a.summary.requests.failed, 0);
  assert.equal(a.summary.requests.incomplete, 0);
  const approx = run('approximate');
  assert.equal(approx.kvEvents.mode, 'approximate');
  assert.equal(approx.kvEvents.feed, null);
  assert.equal(approx.summary.requests.sent, a.summary.requests.sent);
});
