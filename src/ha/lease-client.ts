// The three calls leader election makes on a coordination.k8s.io/v1 Lease (read, create, replace with the
// resourceVersion read: optimistic concurrency), through @kubernetes/client-node's CoordinationV1Api. Each call
// carries an AbortSignal, so a hung API server costs a caller no more than the deadline it chose. A 404 on read is
// "no lease"; a 409 on create or replace (AlreadyExists, Conflict) is "someone else wrote first"; anything else
// (unreachable, 5xx, 403, a timeout) throws LeaseApiError.
import { hostname } from 'node:os';
import type { CoordinationV1Api, V1Lease, V1ObjectMeta } from '@kubernetes/client-node';
import type { KubeTarget } from '../kube/kube-target.js';
import { EarError } from '../errors/errors.js';

/** The lease's spec as leader election reads it (client-go's LeaderElectionRecord). */
export interface LeaseRecord {
  /** '' when nobody holds it (released). */
  holderIdentity: string;
  /** null when the object does not say. */
  leaseDurationSeconds: number | null;
  acquireTime: Date | null;
  renewTime: Date | null;
  leaseTransitions: number;
}

export interface ObservedLease {
  record: LeaseRecord;
  /** Changes on every write: the optimistic-concurrency token and the "has it changed" test. */
  resourceVersion: string;
  /** The object's metadata as read, kept whole so a replace keeps its labels, annotations and owners. */
  metadata: V1ObjectMeta;
}

export type WriteResult = ObservedLease | 'conflict';

export interface LeaseClient {
  /** "namespace/name", for logs and /ready. */
  readonly name: string;
  get (signal: AbortSignal): Promise<ObservedLease | null>;
  create (record: LeaseRecord, signal: AbortSignal): Promise<WriteResult>;
  replace (record: LeaseRecord, previous: ObservedLease, signal: AbortSignal): Promise<WriteResult>;
}

export class LeaseApiError extends EarError {
  /** The API server's HTTP status, or null when no answer came (unreachable, aborted). */
  readonly apiStatus: number | null;
  constructor (op: string, apiStatus: number | null, detail: string) {
    super('EAR_ERR_LEASE_API', `lease ${op}: ${apiStatus === null ? '' : `HTTP ${apiStatus}: `}${detail}`);
    this.name = 'LeaseApiError';
    this.apiStatus = apiStatus;
  }
}

/** This replica's name in the lease: the pod's name (POD_NAME, from the downward API), else host and pid. */
export function replicaIdentity (env: NodeJS.ProcessEnv = process.env): string {
  return env.POD_NAME !== undefined && env.POD_NAME !== '' ? env.POD_NAME : `${hostname()}_${process.pid}`;
}

function time (v: unknown): Date | null {
  if (v === undefined || v === null) return null;
  // client-node hands MicroTime back as the string it read (it has no deserializer for it).
  const d = v instanceof Date ? v : new Date(String(v));
  return Number.isNaN(d.getTime()) ? null : d;
}

function observed (lease: V1Lease): ObservedLease {
  const s = lease.spec ?? {};
  return {
    record: {
      holderIdentity: s.holderIdentity ?? '',
      leaseDurationSeconds: typeof s.leaseDurationSeconds === 'number' ? s.leaseDurationSeconds : null,
      acquireTime: time(s.acquireTime),
      renewTime: time(s.renewTime),
      leaseTransitions: typeof s.leaseTransitions === 'number' ? s.leaseTransitions : 0
    },
    resourceVersion: lease.metadata?.resourceVersion ?? '',
    metadata: lease.metadata ?? {}
  };
}

/** An HTTP status from client-node's ApiException, or null (no answer). */
function statusOf (err: unknown): number | null {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' && code >= 100 && code < 600 ? code : null;
}

function apiError (op: string, err: unknown): LeaseApiError {
  const status = statusOf(err);
  const body = (err as { body?: unknown }).body;
  const message = typeof body === 'object' && body !== null && typeof (body as { message?: unknown }).message === 'string'
    ? (body as { message: string }).message
    : (err as Error).name === 'AbortError' ? 'timed out' : (err as Error).message;
  return new LeaseApiError(op, status, message.length > 300 ? `${message.slice(0, 300)}…` : message);
}

export async function kubeLeaseClient (target: KubeTarget, leaseName: string): Promise<LeaseClient> {
  const k8s = await import('@kubernetes/client-node');
  const api: CoordinationV1Api = target.kubeConfig.makeApiClient(k8s.CoordinationV1Api);
  const namespace = target.namespace;
  // Each call's signal goes in through a middleware (the generated API takes no signal of its own). The object-
  // parameter API runs the observable flavour of middleware: pre and post return client-node's Observable.
  const withSignal = (signal: AbortSignal): never => ({
    middleware: [{
      pre: (ctx: { setSignal (s: AbortSignal): void }) => { ctx.setSignal(signal); return new k8s.Observable(Promise.resolve(ctx)); },
      post: <T>(r: T) => new k8s.Observable(Promise.resolve(r))
    }],
    middlewareMergeStrategy: 'append'
  }) as never;
  // The API server parses MicroTime with exactly six fractional digits; V1MicroTime prints them (a Date, three).
  const spec = (r: LeaseRecord): V1Lease['spec'] => ({
    holderIdentity: r.holderIdentity,
    leaseDurationSeconds: r.leaseDurationSeconds ?? undefined,
    acquireTime: r.acquireTime === null ? undefined : new k8s.V1MicroTime(r.acquireTime.getTime()),
    renewTime: r.renewTime === null ? undefined : new k8s.V1MicroTime(r.renewTime.getTime()),
    leaseTransitions: r.leaseTransitions
  });
  const write = async (op: string, call: () => Promise<V1Lease>): Promise<WriteResult> => {
    try {
      return observed(await call());
    } catch (err) {
      if (statusOf(err) === 409) return 'conflict';
      throw apiError(op, err);
    }
  };
  return {
    name: `${namespace}/${leaseName}`,
    async get (signal) {
      try {
        return observed(await api.readNamespacedLease({ name: leaseName, namespace }, withSignal(signal)));
      } catch (err) {
        if (statusOf(err) === 404) return null;
        throw apiError('read', err);
      }
    },
    create (record, signal) {
      const body: V1Lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: leaseName, namespace }, spec: spec(record) };
      return write('create', () => api.createNamespacedLease({ namespace, body }, withSignal(signal)));
    },
    replace (record, previous, signal) {
      const body: V1Lease = {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { ...previous.metadata, name: leaseName, namespace, resourceVersion: previous.resourceVersion },
        spec: spec(record)
      };
      return write('replace', () => api.replaceNamespacedLease({ name: leaseName, namespace, body }, withSignal(signal)));
    }
  };
}
