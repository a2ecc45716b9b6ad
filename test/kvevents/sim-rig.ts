// A kv-events thread over its own shared region, fed by real `ear sim` engines, with the gateway's own feature
// path (src/gateway/features.ts) to compute the keys a prompt gets: what the precise-mode tests share.
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { createRegion, Region } from '../../src/core/region.js';
import { BlockHasher } from '../../src/core/block-keys.js';
import { PrefixIndex } from '../../src/core/prefix-index.js';
import { computeFeatures } from '../../src/features/features.js';
import { startKvEventsThread, type KvBackendSpec, type KvBackendStats, type KvEventsThread } from '../../src/kvevents/kv-events-thread.js';
import { parseKvEventsConfig } from '../../src/sim/kv-events-config.js';
import { startSim, type SimServer, type StartSimOptions } from '../../src/sim/server.js';
import { createTokenizerSync } from '../../src/tokenize/index.js';

export const BLOCK = 16;
const quiet = pino({ level: 'silent' });

export interface Rig {
  /** The main thread's handle on the rig's region (the pod table's writer, a ring producer). */
  region: Region;
  thread: KvEventsThread;
  index: PrefixIndex;
  /** Keys the gateway computes for a completions request with this prompt. */
  keys (prompt: string, model?: string): BigUint64Array;
  /** Deepest match of the prompt's keys, and that pod's count. */
  match (prompt: string, pod: number): { deepest: number; pod: number };
  backend (pod: number): Promise<KvBackendStats>;
  close (): Promise<void>;
}

export function startRig (): Rig {
  const shared = createRegion({ prefixIndexKeys: 1 << 14, sessions: 64, heapJobs: 16, recordRingOps: 1 << 10, pods: 8, scratchSlots: 6, scratchBytes: 1 << 18 });
  const region = new Region(shared);
  const index = new PrefixIndex(region);
  const ctx = { tokenizer: createTokenizerSync('character'), hasher: new BlockHasher(region), blockSize: BLOCK };
  const thread = startKvEventsThread(shared, {
    assumedTtlMs: 5000, blockSize: BLOCK, subscriber: { replayTimeoutMs: 1000, reconnectMinMs: 20, reconnectMaxMs: 200 }
  });
  const keys = (prompt: string, model = 'm'): BigUint64Array =>
    computeFeatures(ctx, 'completions', Buffer.from(JSON.stringify({ model, prompt, max_tokens: 1 }))).blockKeys;
  // longestPrefix reads keys in place: put them in this thread's scratch area (the hasher's) first.
  const match = (prompt: string, pod: number): { deepest: number; pod: number } => {
    const k = keys(prompt);
    const span = ctx.hasher.hash(Array.from(Buffer.from(prompt)), BLOCK, ctx.hasher.rootSeed('m'));
    assert.deepEqual([...span.keys], [...k], 'the features path and the hasher agree');
    const deepest = index.longestPrefix(span);
    return { deepest, pod: index.counts[pod] };
  };
  return {
    region,
    thread,
    index,
    keys,
    match,
    async backend (pod) {
      const s = (await thread.stats()).backends.find((b) => b.index === pod && b.active);
      assert.ok(s, `pod ${pod} is followed`);
      return s;
    },
    close: async () => { await thread.stop(); }
  };
}

export interface EventSim { sim: SimServer; spec: KvBackendSpec }

/** A sim publishing KV events (with replay) as pod `pod`; `ports` reuses a previous sim's addresses (a restart). */
export async function eventSim (pod: number, opts: StartSimOptions = {}, ports?: { http: number; pub: string; replay: string }): Promise<EventSim> {
  const cfg = parseKvEventsConfig({
    enable_kv_cache_events: true,
    endpoint: ports?.pub ?? 'tcp://127.0.0.1:*',
    replay_endpoint: ports?.replay ?? 'tcp://127.0.0.1:*'
  });
  for (let attempt = 0; ; attempt++) {
    try {
      const sim = await startSim({
        host: '127.0.0.1', port: ports?.http ?? 0, timeScale: 0, logger: quiet, servedModelName: ['m'], stopProbability: 0,
        kvEventsConfig: cfg, ...opts
      });
      return { sim, spec: { index: pod, id: `sim-${pod}`, model: 'm', kvEvents: sim.kvEventsEndpoint!, replay: sim.kvReplayEndpoint, topic: '' } };
    } catch (err) {
      // ZMQ frees a closed socket's port a moment after close(): retry a busy address.
      if (ports === undefined || attempt >= 100 || !/in use|EADDRINUSE/i.test(String((err as Error).message))) throw err;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

export async function complete (s: SimServer, prompt: string, extra: Record<string, unknown> = {}): Promise<void> {
  const r = await fetch(`${s.url}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', prompt, max_tokens: 1, ...extra })
  });
  assert.equal(r.status, 200, await r.text());
}

/** A prompt of n lowercase letters (n tokens with the character tokenizer), different for every seed. */
export { text as prompt } from '../sim/http-helpers.js';
