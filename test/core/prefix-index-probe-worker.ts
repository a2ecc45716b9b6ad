// Reader side of the protocol test: announces it is about to read, then reads one key once and reports.
import { workerData, parentPort } from 'node:worker_threads';
import { Region, type SharedRegion } from '../../src/core/region.js';
import { PrefixIndex } from '../../src/core/prefix-index.js';

const { shared, key, op, flagPtr } = workerData as { shared: SharedRegion; key: bigint; op: 'lookup' | 'longestPrefix'; flagPtr: number };
const region = new Region(shared);
const area = region.claimScratch();
const ix = new PrefixIndex(region, { ptr: area.ptr, bytes: 4096 });
const keyPtr = area.ptr + 4096;
region.u64[keyPtr >>> 3] = key;
Atomics.store(region.i32, flagPtr >>> 2, 1);
Atomics.notify(region.i32, flagPtr >>> 2);
if (op === 'lookup') {
  parentPort!.postMessage(ix.lookup(key));
} else {
  ix.longestPrefix({ ptr: keyPtr, count: 1 });
  parentPort!.postMessage(ix.counts.reduce<number[]>((pods, n, p) => (n > 0 ? [...pods, p] : pods), []));
}
