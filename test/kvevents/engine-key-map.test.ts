import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { EngineKeyMap, hi32, join64, lo32 } from '../../src/kvevents/engine-key-map.js';

test('u64 halves round-trip', () => {
  for (const v of [0n, 1n, 0xffff_ffffn, 0x1_0000_0000n, 0xffff_ffff_ffff_ffffn, 0x8000_0000_0000_0001n]) {
    const lo = lo32(v);
    assert.equal(join64(lo, hi32()), v);
  }
});

test('property: behaves as a Map with a cap that evicts the oldest stored entry', () => {
  const op = fc.oneof(
    fc.record({ kind: fc.constant('set' as const), h: fc.integer({ min: 0, max: 40 }), key: fc.integer({ min: 1, max: 3 }), tier: fc.constantFrom(1, 4) }),
    fc.record({ kind: fc.constant('del' as const), h: fc.integer({ min: 0, max: 40 }) }),
    fc.record({ kind: fc.constant('clear' as const) })
  );
  fc.assert(fc.property(fc.integer({ min: 1, max: 12 }), fc.array(op, { maxLength: 200 }), (cap, ops) => {
    const m = new EngineKeyMap(cap);
    // model: insertion-ordered Map (first = oldest stored), hash → [key, tiers]
    const model = new Map<bigint, [number, number]>();
    const hashOf = (h: number): bigint => BigInt(h) * 0x9e37_79b9_7f4a_7c15n & 0xffff_ffff_ffff_ffffn;
    for (const o of ops) {
      if (o.kind === 'clear') {
        m.clear();
        model.clear();
        continue;
      }
      const h = hashOf(o.h);
      const lo = lo32(h);
      const hi = hi32();
      if (o.kind === 'set') {
        const evicted: number[] = [];
        m.set(lo, hi, o.key, 0, o.tier, (k, _kh, t) => evicted.push(k, t));
        const cur = model.get(h);
        if (cur) {
          if (cur[0] === o.key) cur[1] |= o.tier;
          else {
            assert.deepEqual(evicted, [cur[0], cur[1]], 'a replaced key is handed back');
            cur[0] = o.key;
            cur[1] = o.tier;
          }
        } else {
          if (model.size >= cap) {
            const [oh, ov] = model.entries().next().value as [bigint, [number, number]];
            model.delete(oh);
            assert.deepEqual(evicted, [ov[0], ov[1]], 'the oldest entry is evicted');
          } else assert.deepEqual(evicted, []);
          model.set(h, [o.key, o.tier]);
        }
      } else {
        const s = m.find(lo, hi);
        assert.equal(s >= 0, model.has(h));
        if (s >= 0) m.delete(s);
        model.delete(h);
      }
      assert.equal(m.size, model.size);
    }
    for (const [h, [key, tiers]] of model) {
      const s = m.find(lo32(h), hi32());
      assert.ok(s >= 0);
      assert.equal(m.keyLo[s], key);
      assert.equal(m.tiers[s], tiers);
    }
  }), { numRuns: 300 });
});
