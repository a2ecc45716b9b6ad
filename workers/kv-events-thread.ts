// The kv-events thread: the prefix index's only writer (ARCHITECTURE.md principle 1). It applies the record ops
// that the gateway pushes on the ring and ages assumed entries out; engine KV events join here in precise mode.
// Stops when the parent posts 'stop'; posts its counters when asked with 'stats'.
import { parentPort, workerData } from 'node:worker_threads';
import { Region, type SharedRegion } from '../src/core/region.js';
import { PrefixIndexWriter } from '../src/core/prefix-index.js';
import { RingConsumer } from '../src/core/ring.js';
import { IndexFeeder } from '../src/kvevents/index-feeder.js';

export interface KvEventsThreadData {
  shared: SharedRegion;
  assumedTtlMs: number;
}

const data = workerData as KvEventsThreadData;
const region = new Region(data.shared);
const feeder = new IndexFeeder(new PrefixIndexWriter(region), new RingConsumer(region), { assumedTtlMs: data.assumedTtlMs, expiryBudget: 4096 });
const epochMs = (): number => performance.timeOrigin + performance.now();

let stopped = false;
let timer: NodeJS.Timeout | null = null;
let lastExpiry = 0;

function tick (): void {
  timer = null;
  if (stopped) return;
  const applied = feeder.pump();
  const now = epochMs();
  if (now - lastExpiry >= 100) {
    feeder.expire(now);
    lastExpiry = now;
  }
  // Busy while ops arrive; otherwise a short sleep (the ring is bounded and counts what it drops).
  if (applied > 0) setImmediate(tick);
  else timer = setTimeout(tick, 1);
}

parentPort?.on('message', (msg: unknown) => {
  if (msg === 'stop') {
    stopped = true;
    if (timer) clearTimeout(timer);
    feeder.pump();
    parentPort?.postMessage({ type: 'stopped', stats: feeder.stats });
    parentPort?.close();
  } else if (msg === 'stats') {
    parentPort?.postMessage({ type: 'stats', stats: feeder.stats });
  }
});
tick();
