// Active-passive replicas (`ha.mode: active-passive`): this replica contends for the leader lease and reports
// ready on /ready only while it leads. A follower is a hot standby: it runs in full (probes its backends, follows
// their KV events, keeps its tables) and serves whatever reaches it anyway (a port-forward, a client that
// bypasses the Service), so taking over needs no warm-up; only the Service's traffic goes to the leader.
import type { GatewayConfig } from '../config/index.js';
import type { ReadinessCondition } from '../fleet/fleet.js';
import { kubeTarget, type KubeTargetOptions } from '../kube/kube-target.js';
import { kubeLeaseClient, replicaIdentity } from './lease-client.js';
import { LeaderElector, type ElectorLog } from './leader-elector.js';

/**
 * The lease's kubeconfig and namespace: `ha.kubeconfig` / `ha.namespace`, else the `discovery` section's
 * (when the configuration has one), else kubeTarget's defaults.
 */
export function leaseTargetOptions (config: Readonly<GatewayConfig>): KubeTargetOptions {
  // The discovery section's '' means "not given".
  const d = config.discovery;
  return { kubeconfig: config.ha.kubeconfig ?? (d?.kubeconfig || null), namespace: config.ha.namespace ?? (d?.namespace || null) };
}

export interface ActivePassive {
  readonly elector: LeaderElector;
  /** For the gateway's /ready: ready while leading; a follower's body names the lease and its holder. */
  readiness (): ReadinessCondition;
  /** Stops contending and releases the lease if held. */
  close (): Promise<void>;
}

export async function startActivePassive (config: Readonly<GatewayConfig>, log: ElectorLog, env: NodeJS.ProcessEnv = process.env): Promise<ActivePassive> {
  const target = await kubeTarget(leaseTargetOptions(config), env);
  const client = await kubeLeaseClient(target, config.ha.leaseName);
  const identity = replicaIdentity(env);
  const elector = new LeaderElector({
    client,
    identity,
    leaseDurationSeconds: config.ha.leaseDurationSeconds,
    renewDeadlineSeconds: config.ha.renewDeadlineSeconds,
    retryPeriodSeconds: config.ha.retryPeriodSeconds,
    log
  });
  log.info({ lease: client.name, server: target.server, identity, leaseDurationSeconds: config.ha.leaseDurationSeconds }, 'active-passive: contending for the leader lease');
  elector.start();
  return {
    elector,
    readiness () {
      const s = elector.state;
      const ha = { mode: 'active-passive', ...s };
      if (s.role === 'leader') return { ready: true, ha };
      const holder = s.holder === null ? 'not yet read' : s.holder === '' ? 'released, not yet taken' : s.holder === identity ? 'this replica, not renewed in time' : `held by ${s.holder}`;
      return { ready: false, reason: `active-passive standby: the leader lease ${s.lease} is ${holder}`, ha };
    },
    close: () => elector.close()
  };
}
