// The reader protocol, step by step: this thread plays a writer frozen in the middle of a write (slot seq
// odd) or of a backward shift (move epoch odd, the key not where a reader looks), and a reader thread must
// wait it out and report the state after the write, never the half-done one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { createRegion, Region } from '../../src/core/region.js';
import { PrefixIndexWriter } from '../../src/core/prefix-index.js';
import { until } from '../fixtures/wait.js';

const WORKER = new URL('./prefix-index-probe-worker.js', import.meta.url);
const KEY = 0x0123456789abcdefn;

for (const op of ['lookup', 'longestPrefix'] as const) {
  for (const frozen of ['slot write', 'move'] as const) {
    test(`${op} waits out a ${frozen} in progress and sees its result`, async () => {
      const shared = createRegion({ prefixIndexKeys: 64, scratchSlots: 4, scratchBytes: 1 << 16 });
      const r = new Region(shared);
      const ix = new PrefixIndexWriter(r);
      ix.insert(KEY, 5, ix.kind.confirmed, 0);
      const c = (n: string): number => r.const(n);
      const slots = ix.stats().slots;
      let e = -1;
      for (let s = 0; s < slots && e < 0; s++) {
        const at = ix.base + c('IX_HEADER_BYTES') + s * c('IX_ENTRY_BYTES');
        if (r.u64[(at + c('IX_E_KEY')) >>> 3] === KEY) e = at;
      }
      const seq = (e + c('IX_E_SEQ')) >>> 2;
      const keyWord = (e + c('IX_E_KEY')) >>> 3;
      const podWord = (e + c('IX_E_BITS')) >>> 3; // kind CONFIRMED, pods 0..63
      const epoch = (ix.base + c('IX_H_MOVE_EPOCH')) >>> 2;

      // Freeze mid-way.
      if (frozen === 'slot write') {
        Atomics.add(r.i32, seq, 1);
      } else {
        Atomics.add(r.i32, epoch, 1);
        Atomics.store(r.u64, keyWord, 0n); // the key has left this slot and is not visible anywhere yet
      }
      const flagPtr = r.claimScratch().ptr;
      const w = new Worker(WORKER, { workerData: { shared, key: KEY, op, flagPtr } });
      const answer = new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject); });
      await until(() => Atomics.load(r.i32, flagPtr >>> 2) !== 0, 'the reader to start reading');
      await sleep(50); // the reader is reading now: a reader that ignores the protocol answers in this time

      // Finish the write: pod 9 joins.
      if (frozen === 'slot write') {
        Atomics.store(r.u64, podWord, (1n << 5n) | (1n << 9n));
        Atomics.add(r.i32, seq, 1);
      } else {
        Atomics.store(r.u64, podWord, (1n << 5n) | (1n << 9n));
        Atomics.store(r.u64, keyWord, KEY);
        Atomics.add(r.i32, epoch, 1);
      }
      assert.deepEqual(await answer, [5, 9]);
    });
  }
}
