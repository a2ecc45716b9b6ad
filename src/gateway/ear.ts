// Assembles a running gateway: the shared region, the kv-events thread (the index's writer), the route pool,
// the policy and the uWS server. Used by `ear serve`, the end-to-end tests and the e2e evaluation driver.
import { createRegion, Region } from '../core/region.js';
import { createPolicy } from '../core/policies/index.js';
import { startKvEventsThread, type KvEventsThread } from '../kvevents/kv-events-thread.js';
import type { GatewayConfig } from './config.js';
import { createRoutePool, type RoutePool } from './route-pool.js';
import { startGateway, type Gateway } from './server.js';
import { TableRouting } from './table-routing.js';
import { featureSource } from './inline-features.js';

export interface Ear {
  gateway: Gateway;
  routing: TableRouting;
  close (): Promise<void>;
}

/** Assumed presence lives this long when the index learns only from routing (ARCHITECTURE "approximate" mode). */
export const APPROXIMATE_ASSUMED_TTL_MS = 20 * 60_000;

export async function startEar (config: Readonly<GatewayConfig>): Promise<Ear> {
  const policy = createPolicy(config.policy, config.policyConfig);
  const shared = createRegion({ sessions: config.maxSessions, scratchSlots: config.routeThreads + 8 });
  const region = new Region(shared);
  let kv: KvEventsThread | null = null;
  let pool: RoutePool | null = null;
  try {
    kv = startKvEventsThread(shared, { assumedTtlMs: APPROXIMATE_ASSUMED_TTL_MS });
    pool = createRoutePool(shared, { threads: config.routeThreads, tokenizer: config.tokenizer, blockSize: config.blockSize });
    const p = pool;
    const features = featureSource(region, config, p);
    let routing!: TableRouting;
    const gateway = await startGateway({
      config,
      state: (backends) => (routing = new TableRouting(region, backends, policy, { sessionTtlMs: config.sessionIdleMs })),
      features,
      now: () => performance.timeOrigin + performance.now()
    });
    const k = kv;
    return {
      gateway,
      routing,
      async close () {
        await gateway.close();
        await p.close();
        await k.stop();
      }
    };
  } catch (err) {
    await pool?.close();
    await kv?.stop();
    throw err;
  }
}
