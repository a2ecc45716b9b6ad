// Discovery as `ear serve` (and `ear epp`) use it: start it before the gateway so the gateway starts with the
// pods already there, then feed every later change to the gateway as a SIGHUP reload would
// (`gateway.reload({...config, backends})`), coalesced by BackendApplier, with discovery's metrics registered.
import type { Registry } from 'prom-client';
import type { BackendConfig, GatewayConfig } from '../config/index.js';
import { BackendApplier, type ApplierLog } from './backend-applier.js';
import { startPodDiscovery, type PodDiscovery, type PodDiscoveryOptions } from './k8s-pods.js';
import { registerDiscoveryMetrics } from './metrics.js';
import type { ReflectorLog } from './reflector.js';

export interface ReloadTarget {
  reload (config: Readonly<GatewayConfig>): Promise<void>;
  readonly metrics: { readonly registry: Registry };
}

export interface DiscoveredBackends {
  /** The configuration with the backends found at start. */
  readonly config: Readonly<GatewayConfig>;
  readonly discovery: PodDiscovery;
  /** From now on, changes go to `gateway`. */
  attach (gateway: ReloadTarget): BackendApplier;
  close (): Promise<void>;
}

export async function discoverBackends (config: Readonly<GatewayConfig>, log: ReflectorLog & ApplierLog, opts: PodDiscoveryOptions = {}): Promise<DiscoveredBackends> {
  if (config.discovery === null) throw new Error('discoverBackends: no discovery configured');
  let sink: (b: BackendConfig[]) => void = () => {};
  const discovery = await startPodDiscovery(config.discovery, (b) => sink(b), log, opts);
  let applier: BackendApplier | null = null;
  return {
    config: { ...config, backends: discovery.backends() },
    discovery,
    attach (gateway) {
      const a = applier = new BackendApplier((backends) => gateway.reload({ ...config, backends }), log);
      registerDiscoveryMetrics(gateway.metrics.registry, discovery.stats, a.stats);
      sink = (b) => a.push(b);
      // Whatever changed between the start and now.
      a.push(discovery.backends());
      return a;
    },
    async close () {
      applier?.close();
      await discovery.close();
    }
  };
}
