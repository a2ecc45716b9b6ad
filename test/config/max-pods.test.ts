// maxPods: the pod rows of the shared tables, from the file or --max-pods; discovery.maxPods follows it; bad
// values are refused with a message that names the key and the rule.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildConfig, ConfigError } from '../../src/config/index.js';
import { readGatewayConfig } from '../../src/cli/serve-options.js';
import { createAndAttach, podRowsCost } from '../../src/core/region.js';
import { PrefixIndex } from '../../src/core/prefix-index.js';

test('maxPods defaults to 256, takes up to 16384 from the file or --max-pods, and discovery.maxPods follows it', () => {
  assert.equal(buildConfig({}).maxPods, 256);
  assert.equal(buildConfig({ maxPods: 4096 }).maxPods, 4096);
  assert.equal(buildConfig({ maxPods: 16384 }).maxPods, 16384);
  assert.equal(readGatewayConfig({ 'max-pods': '1024', backend: ['http://a:1'] }).maxPods, 1024);
  assert.equal(readGatewayConfig({ 'max-pods': '1024', discovery: 'k8s' }).discovery!.maxPods, 1024, 'discovery follows the flag');
  assert.equal(buildConfig({ maxPods: 600, discovery: { kind: 'k8s' } }).discovery!.maxPods, 600);
  assert.equal(buildConfig({ maxPods: 600, discovery: { kind: 'k8s', maxPods: 500 } }).discovery!.maxPods, 500, 'set lower: kept');
});

test('bad maxPods values are refused by the config checker with a clear message', () => {
  const rule = /config maxPods: must be an integer in \[1, 16384\], got /;
  for (const v of [0, -1, -256, 16385, 1 << 20, 1.5, '2.5', 'many', '', true, null, [256], { n: 1 }]) {
    assert.throws(() => buildConfig({ maxPods: v }), (err: unknown) => err instanceof ConfigError && rule.test(err.message), JSON.stringify(v));
  }
  assert.throws(() => readGatewayConfig({ 'max-pods': '0', backend: ['http://a:1'] }), rule);
  assert.throws(() => buildConfig({ maxPods: 8, discovery: { kind: 'k8s', maxPods: 9 } }),
    /config discovery\.maxPods: must be at most maxPods \(8, the pod rows\), got 9/);
  assert.throws(() => buildConfig({ maxPods: 2, backends: [{ url: 'http://a:1' }, { url: 'http://b:1' }, { url: 'http://c:1' }] }),
    /config backends: lists 3 backends but maxPods is 2 \(one pod row each\): raise maxPods/);
});

test('the shared tables are laid out for the rows asked for: pod and load rows, the index\'s pods, and what they cost', () => {
  const costs: number[] = [];
  for (const pods of [300, 4096]) {
    const r = createAndAttach({ prefixIndexKeys: 1 << 10, sessions: 64, heapJobs: 16, recordRingOps: 64, pods, scratchSlots: 2, scratchBytes: 1 << 16 });
    const cost = podRowsCost(r);
    assert.equal(cost.rows, pods);
    assert.equal(new PrefixIndex(r).maxPods, pods);
    // About 104 bytes a row: pod table 32, load table 64, a loss epoch 4 and a voided-at time 4; and a loss ring of
    // 8-byte keys, 4,096 a row up to 512 rows and 16 MiB over all rows past that (the index's part in whole groups of 256).
    const ring = r.fn<(pods: number) => number>('ixLossRing')(pods);
    assert.equal(ring, pods <= 512 ? 4096 : (1 << 21) / 4096);
    const perRow = 104 + 8 * ring;
    assert.ok(cost.bytes >= pods * perRow && cost.bytes < pods * perRow + 256 * (8 + 8 * ring) + 256, `${cost.bytes} bytes for ${pods} rows`);
    assert.ok(cost.regionBytes > cost.bytes);
    costs.push(cost.bytes);
  }
  assert.ok(costs[1] > costs[0]);
  const r = createAndAttach({ prefixIndexKeys: 1 << 10, sessions: 64, heapJobs: 16, recordRingOps: 64, scratchSlots: 1, scratchBytes: 1 << 16 });
  const ring = r.fn<(pods: number) => number>('ixLossRing');
  assert.deepEqual([1, 256, 512, 513, 1024, 4096, 16384].map(ring), [4096, 4096, 4096, 2048, 2048, 512, 128], 'loss ring entries a row: 16 MiB over the rows past 512');
  assert.throws(() => createAndAttach({ pods: 16385 }), /pod rows must be an integer in \[1, 16384\], got 16385/);
  assert.throws(() => createAndAttach({ pods: 0 }), /pod rows must be an integer in \[1, 16384\], got 0/);
});
