// Retention in the lab (issue 31 part 3), on a tiny fixed-seed run short of KV and of seats (3 engines of 6,000
// blocks, 2 requests each at once, 12 sessions, the engines' KV events followed: precise mode). The lab counts the
// retained prefixes its engines evicted, as the gateway does from the same events; and admission's rule (a new
// session's request parked on a pod whose room retained prefixes took goes, when a seat frees, to a pod with room and
// a seat) is measured against the same policy without it: program-ttl, whose placement is the same either way.
// Every figure is a pure function of the seed (virtual time).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runDes } from '../../../src/eval/drivers/des.js';
import { loadWorkload } from '../../../src/eval/workloads/index.js';
import { createPolicy, registerPolicy } from '../../../src/core/policies/index.js';

test('des: retained prefixes evicted are counted, and admission\'s retention rule evicts no more of them', () => {
  // program-ttl's decisions without Policy.keepsRetained: admission releases a parked request where it was placed.
  registerPolicy('program-ttl-plain', () => {
    const p = createPolicy('program-ttl', {});
    return { name: 'program-ttl-plain', route: p.route };
  });
  const w = loadWorkload('agentic', { sessions: 12, rate: 0.5, seed: 1 });
  const run = (policy: string) => runDes({
    workload: w, policy, engines: 3, profile: 'h20-qwen3-coder', seed: 2, numGpuBlocks: 6000, kvEvents: 'precise', maxConcurrent: 2, retention: { maxShare: 0.9 }
  });
  const kept = run('program-ttl');
  const plain = run('program-ttl-plain');
  assert.ok(kept.retention.reroutes > 0, `requests routed again: ${kept.retention.reroutes}`);
  assert.equal(plain.retention.reroutes, 0);
  assert.ok(plain.retention.evictions > 0, 'the lab sees its engines evict retained prefixes');
  assert.ok(kept.retention.evictions <= plain.retention.evictions, `evicted with the rule ${kept.retention.evictions}, without ${plain.retention.evictions}`);
  assert.equal(kept.summary.requests.failed, plain.summary.requests.failed);
  assert.equal(kept.retention.retained, plain.retention.retained, 'the same tool-call turns retained');
});
