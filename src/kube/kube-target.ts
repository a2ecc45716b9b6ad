// Which Kubernetes API server and namespace EAR talks to, for pod discovery and for the leader lease alike: a
// kubeconfig path if one is given, else in-cluster (KUBERNETES_SERVICE_HOST and the service account), else
// KUBECONFIG or ~/.kube/config; the namespace given, else POD_NAMESPACE, else the service account's, else the
// kubeconfig context's, else "default". Unlike client-node's loadFromDefault, finding none of these is an error,
// not a silent http://localhost:8080 (the gateway's own default port).
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { EarError } from '../errors/errors.js';

const SERVICE_ACCOUNT_NAMESPACE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

export interface KubeTarget {
  kubeConfig: KubeConfig;
  namespace: string;
  /** The API server's URL, for logs. */
  server: string;
}

export interface KubeTargetOptions {
  kubeconfig: string | null;
  namespace: string | null;
}

export class KubeTargetError extends EarError {
  constructor (message: string) {
    super('EAR_ERR_CONFIG', message);
    this.name = 'KubeTargetError';
  }
}

export async function kubeTarget (opts: KubeTargetOptions, env: NodeJS.ProcessEnv = process.env): Promise<KubeTarget> {
  // Loaded only when asked for: the generated client is large, and active-active replicas never need it.
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  try {
    if (opts.kubeconfig !== null) {
      kc.loadFromFile(opts.kubeconfig);
    } else if (env.KUBERNETES_SERVICE_HOST !== undefined && env.KUBERNETES_SERVICE_HOST !== '') {
      kc.loadFromCluster();
    } else if ((env.KUBECONFIG ?? '') !== '' || existsSync(join(homedir(), '.kube', 'config'))) {
      kc.loadFromDefault();
    } else {
      throw new KubeTargetError('no Kubernetes API server: give a kubeconfig (discovery.kubeconfig, ha.kubeconfig, --kubeconfig), run in a pod, or set KUBECONFIG');
    }
  } catch (err) {
    if (err instanceof KubeTargetError) throw err;
    throw new KubeTargetError(`cannot load the kubeconfig${opts.kubeconfig === null ? '' : ` ${opts.kubeconfig}`}: ${(err as Error).message}`);
  }
  const cluster = kc.getCurrentCluster();
  if (cluster === null) throw new KubeTargetError(`the kubeconfig${opts.kubeconfig === null ? '' : ` ${opts.kubeconfig}`} has no current cluster`);
  return { kubeConfig: kc, namespace: resolveNamespace(opts.namespace, kc, env), server: cluster.server };
}

/** The namespace given, else POD_NAMESPACE, else the service account's, else the kubeconfig context's, else "default". */
export function resolveNamespace (given: string | null, kc: KubeConfig, env: NodeJS.ProcessEnv = process.env): string {
  let namespace = given ?? (env.POD_NAMESPACE !== undefined && env.POD_NAMESPACE !== '' ? env.POD_NAMESPACE : null);
  if (namespace === null && existsSync(SERVICE_ACCOUNT_NAMESPACE)) namespace = readFileSync(SERVICE_ACCOUNT_NAMESPACE, 'utf8').trim() || null;
  return namespace ?? kc.getContextObject(kc.getCurrentContext())?.namespace ?? 'default';
}
