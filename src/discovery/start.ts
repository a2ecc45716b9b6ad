// The one call `ear serve` and `ear epp` make for discovery: nothing without a `discovery` section; else the pods
// listed before the gateway starts (attach.ts), with @kubernetes/client-node imported only then (~0.5 s).
import type { GatewayConfig } from '../config/index.js';
import type { ApplierLog } from './backend-applier.js';
import type { DiscoveredBackends } from './attach.js';
import type { ReflectorLog } from './reflector.js';

export interface ParentLog {
  child (bindings: Record<string, unknown>): ReflectorLog & ApplierLog;
}

/** null without discovery; 'failed' once the reason is printed (no kubeconfig, no cluster): the command exits 2. */
export async function startDiscovery (config: Readonly<GatewayConfig>, log: ParentLog, command = 'ear serve'): Promise<DiscoveredBackends | null | 'failed'> {
  if (config.discovery === null) return null;
  try {
    const { discoverBackends } = await import('./attach.js');
    return await discoverBackends(config, log.child({ component: 'discovery' }));
  } catch (err) {
    console.error(`${command}: discovery: ${(err as Error).message}`);
    return 'failed';
  }
}
