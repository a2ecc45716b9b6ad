import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createAndAttach } from '../../src/core/region.js';
import { PodTable } from '../../src/core/pod-table.js';
import { PrefixIndexWriter } from '../../src/core/prefix-index.js';
import { RingConsumer, RingProducer } from '../../src/core/ring.js';

const small = { prefixIndexKeys: 512, sessions: 16, heapJobs: 16, recordRingOps: 1024, pods: 8, scratchSlots: 8, scratchBytes: 1 << 12 };
const T0 = 1_795_000_000_000; // epoch ms: beyond 2^32, so the kernel's u32 time must wrap as `now >>> 0` does

// An op, or (release) the pod table's writer ending a row's lease between two pushes. `old` stamps the op with
// the lease the row had `old` releases ago (0: the current one), as a late op of a departed backend would be.
type Op = { kind: 'assumed' | 'touch' | 'forget' | 'release'; key: number; pod: number; dt: number; old: number };
const op = fc.record({
  kind: fc.constantFrom<Op['kind']>('assumed', 'assumed', 'assumed', 'touch', 'forget', 'release'),
  key: fc.integer({ min: 1, max: 60 }),
  pod: fc.integer({ min: 0, max: 7 }),
  dt: fc.integer({ min: 0, max: 3000 }),
  old: fc.constantFrom(0, 0, 0, 1, 2)
});

test('ixApplyRing leaves the index exactly as applying each op of a current lease from JavaScript does (property)', () => {
  fc.assert(fc.property(fc.array(op, { maxLength: 300 }), fc.integer({ min: 1, max: 700 }), (ops: Op[], limit) => {
    const a = createAndAttach(small);
    const wa = new PrefixIndexWriter(a);
    const pods = new PodTable(a);
    const prod = new RingProducer(a);
    const cons = new RingConsumer(a, { ptr: a.claimScratch().ptr, bytes: 64 * 40 }); // small pops: several batches
    const b = createAndAttach(small);
    const wb = new PrefixIndexWriter(b);
    const oc = prod.layout.opcodes;
    const f64bits = (x: number) => new BigUint64Array(new Float64Array([x]).buffer)[0];
    let t = T0;
    const pushed: Array<{ o: Op; key: bigint; t: number; lease: number }> = [];
    for (const o of ops) {
      t += o.dt + 0.25;
      if (o.kind === 'release') {
        pods.release(o.pod);
        continue;
      }
      const key = BigInt(o.key) * 0x9e3779b97f4a7c15n & 0xffffffffffffffffn;
      const opcode = o.kind === 'assumed' ? oc.assumed : o.kind === 'touch' ? oc.touch : oc.forgetPod;
      const lease = Math.max(0, pods.lease(o.pod) - o.old);
      prod.push(opcode, o.pod, key, f64bits(t), BigInt(pushed.length), lease);
      pushed.push({ o, key, t, lease });
    }
    // The consumer checks each op against its row's lease when it applies it: here, after every release.
    let forgotten = 0;
    let stale = 0;
    const taken = Math.min(limit, pushed.length);
    for (const { o, key, t: at, lease } of pushed.slice(0, taken)) {
      if (lease !== pods.lease(o.pod)) { stale++; continue; }
      if (o.kind === 'forget') { wb.clearPod(o.pod, wb.mask.all); forgotten++; } else if (o.kind === 'assumed' || wb.lookup(key) !== null) wb.insert(key, o.pod, wb.kind.assumed, at);
    }
    const r = wa.applyRing(cons, limit);
    assert.deepEqual(r, { taken, applied: taken - stale, stale, forgotten });
    assert.equal(cons.stats().size, pushed.length - taken, 'past the limit: left on the ring');
    for (let k = 1; k <= 60; k++) {
      const key = BigInt(k) * 0x9e3779b97f4a7c15n & 0xffffffffffffffffn;
      assert.deepEqual(wa.lookup(key), wb.lookup(key), `key ${k}`);
    }
    // Same assumed times: expiring at any cut-off removes the same entries.
    for (const ttl of [1000, 5000]) {
      let ea = 0; let eb = 0;
      for (let i = 0; i < 4; i++) { ea += wa.expireAssumed(t, ttl, 1024); eb += wb.expireAssumed(t, ttl, 1024); }
      assert.equal(ea, eb);
    }
    assert.equal(wa.stats().size, wb.stats().size);
  }), { numRuns: 60 });
});

test('an op pushed before its row was released is dropped, however late it is applied; the next lease\'s ops are not', () => {
  const a = createAndAttach(small);
  const w = new PrefixIndexWriter(a);
  const pods = new PodTable(a);
  const prod = new RingProducer(a);
  const cons = new RingConsumer(a);
  const { assumed } = prod.layout.opcodes;
  pods.set(2, { state: 'ready', role: 'both', blockSize: 16, kvBlocks: 0, model: 0 });
  assert.equal(prod.pushKeys(assumed, 2, [11n, 12n], T0), 2, 'stamped with the row\'s lease now (0)');
  pods.release(2);
  assert.equal(prod.pushKeys(assumed, 2, [13n], T0, 0, 0), 1, 'decided under lease 0, pushed after the release');
  assert.equal(prod.pushKeys(assumed, 2, [14n], T0), 1, 'the next backend on the row (lease 1)');
  assert.deepEqual(w.applyRing(cons, 100), { taken: 4, applied: 1, stale: 3, forgotten: 0 });
  assert.equal(w.lookup(11n), null);
  assert.equal(w.lookup(13n), null);
  assert.deepEqual(w.lookup(14n), [2]);
});
