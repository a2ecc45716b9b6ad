// The kv-events thread's work (started by workers/kv-events-thread.ts): the prefix index's only writer
// (docs/architecture.md#principles, 1). It applies the record ops that the gateway pushes on the ring, ages assumed
// entries out, and follows every backend whose engine publishes KV events (one KvEventSubscriber each), applying
// their batches with an EventApplier. Its requests: src/kvevents/thread-protocol.ts.
import type { MessagePort } from 'node:worker_threads';
import { Region } from '../core/region.js';
import { PrefixIndex, PrefixIndexWriter } from '../core/prefix-index.js';
import { BlockHasher } from '../core/block-keys.js';
import { RingConsumer } from '../core/ring.js';
import { serveThread } from '../threads/thread-service.js';
import { ThreadError } from '../threads/outcome.js';
import { IndexFeeder } from './index-feeder.js';
import { EventApplier, type ApplierStats } from './event-applier.js';
import { KvEventSubscriber, type KvSubscriberStats } from './subscriber.js';
import { BAD_ROWS, type KvBackendSpec, type KvBackendStats, type KvEventsProtocol, type KvEventsThreadData, type KvThreadStats } from './thread-protocol.js';
import { ASSUMED_EXPIRY_BUDGET, UPKEEP_EVERY_MS } from '../core/defaults.js';

interface Followed {
  spec: KvBackendSpec;
  sub: KvEventSubscriber;
  applier: EventApplier;
}

/** The last LAG_WINDOW apply lags (ms), a ring. */
const LAG_WINDOW = 4096;
/**
 * Once woken, the thread gathers ops this long before it drains them: a wake per request cost a thread switch
 * each (and the producer's notify a syscall, as a waiter was there), several µs of CPU a request at 10k req/s.
 */
const GATHER_MS = 1;
/**
 * Past its last op the thread keeps draining every GATHER_MS this long before it sleeps until a producer notifies:
 * under steady load a slice with no op is common (the main thread's work comes in batches), and a sleep after each
 * cost a notify that found a waiter, ~9 µs of the producer's CPU, on a quarter of the pushes (measured at 7k req/s
 * with two data-plane threads). Idle, it still sleeps: after this long.
 */
const LINGER_MS = 50;
/**
 * The index warm-up's slice: 4 MB of slots a tick (a page fault each 4 KB: ~15 ms on a 2-core VM), so the ring is
 * still drained every ~16 ms while the whole index (256 MB at the default capacity) is made resident in ~1 s.
 */
const WARM_PAGES_PER_TICK = 1024;

const COUNTERS = [
  'batches', 'events', 'skippedEvents', 'gaps', 'replays', 'replayedBatches', 'resyncs', 'restarts', 'reconnectChecks', 'joinChecks', 'decodeErrors', 'duplicates', 'handlerErrors',
  'socketErrors', 'blocksStored', 'blocksRemoved', 'cleared', 'unplaceable', 'blockSizeMismatch', 'otherGroups', 'unsupportedExtras',
  'malformed', 'unknownRemoved', 'mapDrops'
] as const satisfies ReadonlyArray<keyof (KvSubscriberStats & ApplierStats)>;

/** Runs the kv-events thread over `port` (the parent's) until it is asked to stop. */
export function startKvEventsService (port: MessagePort, data: KvEventsThreadData): void {
  const region = new Region(data.shared);
  // One scratch area for both: the writer's output words first, the hasher's tokens and keys after them.
  const area = region.claimScratch();
  const ixBytes = Math.ceil(PrefixIndex.areaBytes(region) / 64) * 64;
  const writer = new PrefixIndexWriter(region, { ptr: area.ptr, bytes: ixBytes });
  const hasher = new BlockHasher(region, { ptr: area.ptr + ixBytes, bytes: area.bytes - ixBytes });
  const ring = new RingConsumer(region);
  const feeder = new IndexFeeder(writer, ring, { assumedTtlMs: data.assumedTtlMs, expiryBudget: ASSUMED_EXPIRY_BUDGET });
  const epochMs = (): number => performance.timeOrigin + performance.now();

  /** Followed backends by pod index. */
  const followed = new Map<number, Followed>();
  /**
   * Counters of subscribers/appliers already closed, by backend id, so a reconnect does not reset them. Bounded:
   * a fleet that rolls pods through sees new ids forever, so only the data.maxRetiredBackends most recently
   * retired are kept (Map order is retirement order); older ones are dropped, counted in retiredDropped.
   */
  const retired = new Map<string, KvBackendStats>();
  let retiredDropped = 0;
  let purged = 0;
  let restartedRows = 0;

  function retire (s: KvBackendStats): void {
    retired.delete(s.id); // re-inserted at the end: the most recent
    retired.set(s.id, s);
    for (const id of retired.keys()) {
      if (retired.size <= data.maxRetiredBackends) break;
      retired.delete(id);
      retiredDropped++;
    }
  }
  const lags = new Float64Array(LAG_WINDOW);
  let lagCount = 0;

  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  let lastExpiry = 0;
  let lastOps = 0;
  const slots = writer.stats().slots;
  let warmedSlots = 0;
  const warming = (): boolean => data.warmIndex && warmedSlots < slots;

  function tick (): void {
    timer = null;
    if (stopped) return;
    const tail = ring.tail(); // before the pop: a push after it makes the wait below return at once
    const applied = feeder.pump();
    const now = epochMs();
    if (now - lastExpiry >= UPKEEP_EVERY_MS) {
      feeder.expire(now);
      lastExpiry = now;
    }
    if (applied > 0) lastOps = now;
    if (warming()) warmedSlots = writer.warm(warmedSlots, WARM_PAGES_PER_TICK);
    // Draining every GATHER_MS while ops arrive and LINGER_MS after (and while the warm-up lasts); then asleep
    // until a producer pushes (it notifies) or the next expiry slice.
    if (now - lastOps < LINGER_MS || warming()) timer = setTimeout(tick, GATHER_MS);
    else void ring.waitForOps(tail, UPKEEP_EVERY_MS).then(() => { if (!stopped) timer = setTimeout(tick, GATHER_MS); });
  }

  function sameStream (a: KvBackendSpec, b: KvBackendSpec): boolean {
    return a.id === b.id && a.kvEvents === b.kvEvents && a.replay === b.replay && a.topic === b.topic;
  }

  function follow (spec: KvBackendSpec): Followed {
    const applier = new EventApplier(writer, hasher, spec.index, spec.model, { blockSize: data.blockSize, maxMappedBlocks: data.maxMappedBlocks });
    const sub = new KvEventSubscriber({ id: spec.id, endpoint: spec.kvEvents, replayEndpoint: spec.replay, topic: spec.topic }, {
      onBatch: (m) => {
        // Ring ops first: a routing hint recorded before this batch must not overwrite what the batch says.
        feeder.pump();
        const now = epochMs();
        applier.apply(m.batch, now);
        lags[lagCount++ % LAG_WINDOW] = now - m.batch.ts * 1000;
      },
      // The stream lost batches for good (or the engine restarted): what it told us may be stale.
      onResync: () => applier.clear()
    }, { ...data.subscriber, replayOnStart: true, catchUpOnStart: true });
    return { spec, sub, applier };
  }

  function snapshot (f: Followed, active: boolean): KvBackendStats {
    const s = f.sub.stats();
    const m = f.applier.mapped();
    const base: KvBackendStats = {
      ...s, ...f.applier.stats, index: f.spec.index, id: f.spec.id, active,
      indexedBlocks: m.blocks, confirmedBlocks: m.confirmed, offloadedBlocks: m.offloaded
    };
    const old = retired.get(f.spec.id);
    if (old === undefined) return base;
    // Counters add up over the backend's earlier streams; gauges are the live stream's.
    const sum = { ...base };
    for (const k of COUNTERS) sum[k] = base[k] + old[k];
    return sum;
  }

  async function unfollow (f: Followed): Promise<void> {
    await f.sub.close();
    const s = snapshot(f, false);
    s.indexedBlocks = s.confirmedBlocks = s.offloadedBlocks = 0;
    retire(s);
    // No callback fires after close(): purge what this stream told us.
    f.applier.clear();
    purged++;
  }

  async function setBackends (list: readonly KvBackendSpec[]): Promise<void> {
    const wanted = new Map(list.map((s) => [s.index, s]));
    const gone: Followed[] = [];
    for (const [index, f] of followed) {
      const w = wanted.get(index);
      if (w !== undefined && sameStream(w, f.spec)) {
        f.applier.model = w.model;
        f.spec = w;
        continue;
      }
      followed.delete(index);
      gone.push(f);
    }
    // Together, not one after another: a rollout changes streams by the dozen, and the purges queued behind this
    // message wait for it. Every old stream is closed before a new one takes its row.
    await Promise.all(gone.map(unfollow));
    const added: Followed[] = [];
    for (const spec of wanted.values()) {
      if (followed.has(spec.index) || stopped) continue;
      const f = follow(spec);
      followed.set(spec.index, f);
      added.push(f);
    }
    await Promise.all(added.map(async (f) => {
      try {
        await f.sub.start();
      } catch {
        // An endpoint ZMQ refuses outright (config validation lets few through): counted, retried on the next list.
        followed.delete(f.spec.index);
        await f.sub.close();
        const s = snapshot(f, false);
        s.socketErrors++;
        retire(s);
      }
    }));
  }

  /**
   * Released rows (PodTable.release has already moved their leases): stops following the streams of those it still
   * follows (closed together, not one after another), then purges every entry of the rows in every kind in one
   * sweep (IndexFeeder.purgePods drains the ring first). Returns the keys the purge changed.
   */
  async function purgePods (rows: readonly number[]): Promise<number> {
    const gone: Followed[] = [];
    for (const row of rows) {
      const f = followed.get(row);
      if (f === undefined) continue;
      followed.delete(row);
      gone.push(f);
    }
    await Promise.all(gone.map(unfollow));
    return feeder.purgePods(rows);
  }

  /**
   * The engine at `row` restarted (the main thread saw a new process start time on its /metrics): every entry of
   * the row goes, assumed ones too (they were the old process's cache), and a followed stream learns the new
   * process's cache from its replay buffer. A row followed for another backend id is left alone (a late message).
   */
  async function engineRestarted (row: number, id: string): Promise<void> {
    const f = followed.get(row);
    if (f !== undefined && f.spec.id !== id) return;
    feeder.pump();
    writer.clearPods([row], writer.mask.all);
    restartedRows++;
    if (f !== undefined) await f.sub.restarted();
  }

  /** Why `rows` is not a list of distinct pod rows, or null. Checked before anything is purged. */
  function badRows (rows: unknown): string | null {
    if (!Array.isArray(rows) || rows.length === 0 || rows.length > writer.maxPods) {
      return `pod rows must be a list of 1 to ${writer.maxPods} rows`;
    }
    const seen = new Set<number>();
    for (const r of rows) {
      if (!(Number.isInteger(r) && r >= 0 && r < writer.maxPods)) return `pod row must be an integer in [0, ${writer.maxPods}), got ${r}`;
      if (seen.has(r)) return `pod row ${r} is listed twice`;
      seen.add(r);
    }
    return null;
  }

  function quantile (q: number): number | null {
    const n = Math.min(lagCount, LAG_WINDOW);
    if (n === 0) return null;
    const sorted = lags.slice(0, n).sort();
    return sorted[Math.min(n - 1, Math.floor(q * n))];
  }

  function stats (): KvThreadStats {
    const backends: KvBackendStats[] = [];
    const live = new Set<string>();
    for (const f of followed.values()) {
      backends.push(snapshot(f, true));
      live.add(f.spec.id);
    }
    for (const [id, s] of retired) if (!live.has(id)) backends.push(s);
    return { ...feeder.stats, backends, applyLagP50Ms: quantile(0.5), applyLagP99Ms: quantile(0.99), purged, retiredDropped, restartedRows, warmedSlots };
  }

  serveThread<KvEventsProtocol>(port, {
    calls: {
      async backends (m) {
        if (typeof m.assumedTtlMs === 'number') feeder.setAssumedTtl(m.assumedTtlMs);
        await setBackends(m.backends);
      },
      async purge (m) {
        // A bad row is the caller's error, not this thread's: it is answered, and nothing is purged.
        const bad = badRows(m.rows);
        if (bad !== null) throw new ThreadError(BAD_ROWS, bad);
        return await purgePods(m.rows);
      },
      async restarted (m) {
        const bad = badRows([m.row]);
        if (bad !== null) throw new ThreadError(BAD_ROWS, bad);
        await engineRestarted(m.row, m.backendId);
      },
      forget (m) {
        // Only a backend no longer followed: a live one's counters are its stream's.
        const live = [...followed.values()].some((f) => f.spec.id === m.backendId);
        return !live && retired.delete(m.backendId);
      },
      stats: () => stats(),
      async stop () {
        stopped = true;
        if (timer) clearTimeout(timer);
        for (const f of followed.values()) await f.sub.close();
        feeder.pump();
        const s = stats();
        writer.release();
        return s;
      }
    },
    notes: {},
    closesOn: 'stop',
    // A bug ends the thread, as before (its caller has the error as its answer): later calls fail at once rather
    // than run against an index writer in a state nobody knows.
    onError: (err) => setImmediate(() => { throw err; })
  });
  tick();
}
