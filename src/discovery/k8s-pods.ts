// Pod discovery (`discovery: {kind: k8s}`): watches the Pods of a namespace that a label selector (or an
// InferencePool's selector) picks and turns the serving ones into the gateway's backend list. Events come in
// bursts (a rolling update of hundreds of pods): they are coalesced, and the list is handed on only when it
// changed. At most maxPods pods are backends; the ones already chosen stay chosen, and a pod beyond the bound
// waits (logged, on the metrics) until one leaves.
import type { KubeConfig } from '@kubernetes/client-node';
import type { BackendConfig, DiscoveryConfig } from '../config/index.js';
import { kubeTarget, resolveNamespace } from '../kube/kube-target.js';
import { INFERENCE_POOL_GROUP_VERSION, poolSource, type PoolSource } from './inference-pool.js';
import { podVerdict, type SkipReason } from './pod-backend.js';
import { newReflectorStats, Reflector, type KubeObject, type ReflectorLog, type ReflectorOptions, type ReflectorStats } from './reflector.js';

export interface DiscoveryStats extends ReflectorStats {
  /** Pods that are backends now. */
  pods: number;
  /** Pods the selector matches that are not backends now, by why (over-max-pods: beyond maxPods). */
  skipped: Record<SkipReason | 'over-max-pods', number>;
  /** Backend lists handed on. */
  updates: number;
}

export interface PodDiscovery {
  readonly namespace: string;
  readonly stats: DiscoveryStats;
  /** The backend list as last handed on. */
  backends (): BackendConfig[];
  close (): Promise<void>;
}

export interface PodDiscoveryOptions extends Pick<ReflectorOptions, 'backoffMinMs' | 'backoffMaxMs' | 'watchTimeoutSeconds' | 'requestTimeoutMs'> {
  /** Events within this window are applied as one change (ms). */
  coalesceMs?: number;
  /** How long start waits for the first list before going on with no backends (it keeps trying). */
  initialSyncTimeoutMs?: number;
  /** A KubeConfig already loaded (tests); default: from cfg.kubeconfig. */
  kubeConfig?: KubeConfig;
}

const emptySkipped = (): DiscoveryStats['skipped'] => ({ 'not-running': 0, 'not-ready': 0, 'no-ip': 0, terminating: 0, 'bad-name': 0, 'bad-role': 0, 'bad-priority': 0, 'over-max-pods': 0 });

export async function startPodDiscovery (cfg: Readonly<DiscoveryConfig>, onBackends: (b: BackendConfig[]) => void, log: ReflectorLog, opts: PodDiscoveryOptions = {}): Promise<PodDiscovery> {
  const given = cfg.namespace === '' ? null : cfg.namespace;
  const target = opts.kubeConfig === undefined ? await kubeTarget({ kubeconfig: cfg.kubeconfig === '' ? null : cfg.kubeconfig, namespace: given }) : null;
  const kc = target?.kubeConfig ?? opts.kubeConfig!;
  const namespace = target?.namespace ?? resolveNamespace(given, kc);
  const reflectorStats = newReflectorStats();
  const stats: DiscoveryStats = Object.assign(reflectorStats, { pods: 0, skipped: emptySkipped(), updates: 0 });
  const common = {
    kc, log, stats: reflectorStats, backoffMinMs: opts.backoffMinMs, backoffMaxMs: opts.backoffMaxMs,
    watchTimeoutSeconds: opts.watchTimeoutSeconds, requestTimeoutMs: opts.requestTimeoutMs
  };
  for (const k of Object.keys(common) as Array<keyof typeof common>) if (common[k] === undefined) delete common[k];
  const coalesceMs = opts.coalesceMs ?? 100;
  const podsPath = `/api/v1/namespaces/${namespace}/pods`;

  let source: PoolSource | null = cfg.inferencePool === '' ? { labelSelector: cfg.labelSelector, port: cfg.port } : null;
  let pods: Reflector | null = null;
  let emitted: BackendConfig[] = [];
  let emittedKey = '';
  let chosen = new Set<string>();
  let lastOver = 0;
  let timer: NodeJS.Timeout | null = null;
  let closed = false;

  const flush = (): void => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    if (closed || source === null || pods === null || !pods.listed) return;
    const skipped = emptySkipped();
    const ready: BackendConfig[] = [];
    for (const pod of pods.objects.values()) {
      const v = podVerdict(pod, { ...cfg, port: source.port });
      if (v.backend === null) skipped[v.skip]++;
      else ready.push(v.backend);
    }
    // Sticky: pods already backends keep their place; newcomers fill what is left, in name order.
    ready.sort((a, b) => Number(chosen.has(b.id)) - Number(chosen.has(a.id)) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const backends = ready.slice(0, cfg.maxPods).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    skipped['over-max-pods'] = ready.length - backends.length;
    if (skipped['over-max-pods'] !== lastOver) {
      lastOver = skipped['over-max-pods'];
      if (lastOver > 0) log.warn({ maxPods: cfg.maxPods, waiting: lastOver }, 'more serving pods than discovery.maxPods: the extras wait until a backend leaves');
    }
    stats.skipped = skipped;
    stats.pods = backends.length;
    chosen = new Set(backends.map((b) => b.id));
    const key = JSON.stringify(backends);
    if (key === emittedKey) return;
    emittedKey = key;
    emitted = backends;
    stats.updates++;
    onBackends(backends);
  };
  const schedule = (): void => {
    if (timer === null && !closed) timer = setTimeout(flush, coalesceMs);
  };
  const watchPods = (selector: string): Reflector => {
    log.info({ namespace, labelSelector: selector }, 'watching pods');
    const r: Reflector = new Reflector({ ...common, path: podsPath, labelSelector: selector, onChange: () => { if (pods === r) schedule(); } });
    return r.start();
  };

  let pool: Reflector | null = null;
  let pending: Reflector | null = null;
  let pendingSource: PoolSource | null = null;
  let poolSynced: Promise<void> = Promise.resolve();
  if (source !== null) pods = watchPods(source.labelSelector);
  else {
    let firstSource!: () => void;
    poolSynced = new Promise<void>((resolve) => { firstSource = resolve; });
    pool = new Reflector({
      ...common,
      path: `/apis/${INFERENCE_POOL_GROUP_VERSION}/namespaces/${namespace}/inferencepools`,
      fieldSelector: `metadata.name=${cfg.inferencePool}`,
      onChange: (objects: ReadonlyMap<string, KubeObject>) => {
        const obj = objects.get(cfg.inferencePool);
        if (obj === undefined) {
          if (source !== null) log.warn({ inferencePool: cfg.inferencePool }, 'the InferencePool is gone: keeping its last pods until it comes back');
          return;
        }
        const next = poolSource(obj);
        if ('error' in next) {
          log.warn({ inferencePool: cfg.inferencePool, error: next.error }, 'the InferencePool cannot be used: keeping the last source');
          return;
        }
        const prev = pendingSource ?? source;
        if (prev !== null && prev.labelSelector === next.labelSelector) {
          if (prev.port !== next.port) {
            log.info({ inferencePool: cfg.inferencePool, port: next.port }, 'InferencePool target port changed');
            if (pendingSource !== null) pendingSource = next;
            else {
              source = next;
              schedule();
            }
          }
          return;
        }
        // A new selector: the pods it picks are listed before they replace the old ones (no empty list between).
        log.info({ inferencePool: cfg.inferencePool, labelSelector: next.labelSelector, port: next.port }, 'InferencePool source');
        void pending?.stop();
        pendingSource = next;
        const r = pending = watchPods(next.labelSelector);
        void r.synced.then(() => {
          if (closed || pending !== r) return;
          const old = pods;
          pods = r;
          source = pendingSource;
          pending = null;
          pendingSource = null;
          void old?.stop();
          firstSource();
          flush();
        });
      }
    }).start();
  }
  // The first list before the gateway starts, so that it starts with its backends; a server out of reach does
  // not hold the start for ever (the reflectors keep trying and the backends come when they answer).
  let waited: NodeJS.Timeout | undefined;
  const ready = pool !== null ? poolSynced : pods!.synced;
  const inTime = await Promise.race([ready.then(() => true), new Promise<boolean>((resolve) => { waited = setTimeout(() => resolve(false), opts.initialSyncTimeoutMs ?? 10_000); })]);
  clearTimeout(waited);
  if (!inTime) log.warn({ namespace }, 'the Kubernetes API did not answer in time: starting with no backends; they come when it answers');
  flush();

  return {
    namespace,
    stats,
    backends: () => emitted,
    async close () {
      closed = true;
      if (timer !== null) clearTimeout(timer);
      await Promise.all([pool?.stop(), pods?.stop(), pending?.stop()]);
    }
  };
}
