// One request's wait for admission (ARCHITECTURE.md "Request lifecycle" step 3), the same for the gateway's own
// request path and the endpoint picker's: submit to the routing state, the decision and wait metrics, the span,
// cancellation when the client (or the proxy's stream) goes away, and the errors a refusal or a drop becomes.
import { NoCandidateError } from '../core/policy.js';
import { QueueFullError } from '../core/routing-host.js';
import { GatewayError } from './errors.js';
import type { GatewayMetrics } from './metrics.js';
import type { DropReason, Placement, RoutingInput, RoutingState } from './routing-state.js';
import type { AdmissionTrace } from '../telemetry/tracing.js';

export interface AdmissionWaitDeps {
  state: Pick<RoutingState, 'submit' | 'cancel'>;
  now: () => number;
  metrics: Pick<GatewayMetrics, 'admissionWait'>;
  /** ear_routing_decision_seconds of the policy: the time submit took. */
  decisionSeconds: { observe (seconds: number): void };
}

/** Where the caller learns that its client went away, and hears of it while the request waits. */
export interface Abortable { onAbort: (() => void) | null }

/**
 * The placement, already started, once the scheduler releases the request (at once when it can go); null if the
 * client went away while it waited. Rejects with a 429 GatewayError when the queue is full, `dropError` when the
 * scheduler drops the request, and NoCandidateError (as submit throws it) when no backend can take it.
 */
export function waitForAdmission (deps: AdmissionWaitDeps, input: RoutingInput, abortable: Abortable, priorityClass: number,
  traced: AdmissionTrace | null, dropError: (reason: DropReason, waitedMs: number) => Error): Promise<Placement | null> {
  const { state, now } = deps;
  return new Promise((resolve, reject) => {
    const d0 = now();
    let r;
    try {
      r = state.submit(input, {
        released: (p, info) => {
          abortable.onAbort = null;
          deps.metrics.admissionWait.labels(String(info.level)).observe(info.waitMs / 1000);
          traced?.end('released', info.waitMs, info.level, info.promoted);
          resolve(p);
        },
        dropped: (reason, t) => {
          abortable.onAbort = null;
          traced?.end(reason === 'no_backend' ? 'no_candidate' : reason, t - d0, null, false);
          reject(dropError(reason, t - d0));
        }
      }, d0, priorityClass);
    } catch (err) {
      traced?.end(err instanceof QueueFullError ? 'queue_full' : err instanceof NoCandidateError ? 'no_candidate' : 'error', now() - d0, null, false);
      if (err instanceof QueueFullError) reject(new GatewayError('EAR_ERR_QUEUE_FULL', 'too many requests are waiting for admission; retry later', { retryAfterSeconds: err.retryAfterSeconds }));
      else reject(err);
      return;
    }
    deps.decisionSeconds.observe((now() - d0) / 1000);
    if (!('queued' in r)) {
      traced?.end('released', 0, null, false);
      resolve(r);
      return;
    }
    const queued = r;
    // Released inside submit already: the waiter has resolved, nothing waits.
    abortable.onAbort = () => {
      if (!state.cancel(queued)) return;
      traced?.end('cancelled', now() - d0, null, false);
      resolve(null);
    };
  });
}
