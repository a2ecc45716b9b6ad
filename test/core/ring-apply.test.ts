import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createAndAttach } from '../../src/core/region.js';
import { PrefixIndexWriter } from '../../src/core/prefix-index.js';
import { RingConsumer, RingProducer } from '../../src/core/ring.js';

const small = { prefixIndexKeys: 512, sessions: 16, heapJobs: 16, recordRingOps: 1024, pods: 8, scratchSlots: 8, scratchBytes: 1 << 12 };
const T0 = 1_795_000_000_000; // epoch ms: beyond 2^32, so the kernel's u32 time must wrap as `now >>> 0` does

type Op = { kind: 'assumed' | 'touch' | 'forget'; key: number; pod: number; dt: number };
const op = fc.record({ kind: fc.constantFrom<'assumed' | 'touch' | 'forget'>('assumed', 'assumed', 'assumed', 'touch', 'forget'), key: fc.integer({ min: 1, max: 60 }), pod: fc.integer({ min: 0, max: 7 }), dt: fc.integer({ min: 0, max: 3000 }) });

test('ixApplyRing leaves the index exactly as applying each op from JavaScript does (property)', () => {
  fc.assert(fc.property(fc.array(op, { maxLength: 300 }), fc.integer({ min: 1, max: 700 }), (ops: Op[], limit) => {
    const a = createAndAttach(small);
    const wa = new PrefixIndexWriter(a);
    const prod = new RingProducer(a);
    const cons = new RingConsumer(a, { ptr: a.claimScratch().ptr, bytes: 64 * 32 }); // small pops: several batches
    const b = createAndAttach(small);
    const wb = new PrefixIndexWriter(b);
    const oc = prod.layout.opcodes;
    const f64bits = (x: number) => new BigUint64Array(new Float64Array([x]).buffer)[0];
    let t = T0;
    let forgotten = 0;
    for (const [i, o] of ops.entries()) {
      t += o.dt + 0.25;
      const key = BigInt(o.key) * 0x9e3779b97f4a7c15n & 0xffffffffffffffffn;
      const opcode = o.kind === 'assumed' ? oc.assumed : o.kind === 'touch' ? oc.touch : oc.forgetPod;
      prod.push(opcode, o.pod, key, f64bits(t), BigInt(i));
      if (i >= limit) continue; // past the limit: stays on the ring, not applied to either
      if (o.kind === 'forget') { wb.clearPod(o.pod, wb.mask.all); forgotten++; } else if (o.kind === 'assumed' || wb.lookup(key) !== null) wb.insert(key, o.pod, wb.kind.assumed, t);
    }
    const r = wa.applyRing(cons, limit);
    assert.deepEqual(r, { applied: Math.min(limit, ops.length), forgotten });
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
