// One request's wait for admission (docs/architecture.md#admit): submit to the routing state, and
// cancellation when the client (or the proxy's stream) goes away. What happened is reported once, to one callback
// (the pipeline publishes it; an explicit context's prefill records its metrics).
import { NoCandidateError } from '../core/policy.js';
import { QueueFullError } from '../core/admission-control.js';
import type { DropReason, Placement, RoutingInput, Placements } from '../fleet/routing-port.js';
import type { Abortable } from './context.js';

export type AdmissionOutcome = 'released' | 'queue_full' | 'timeout' | 'shutdown' | 'no_candidate' | 'cancelled' | 'error';

/** What became of one wait. */
export interface AdmissionReport {
  outcome: AdmissionOutcome;
  submittedAt: number;
  /** The time submit took (the scheduler's decision); null when it threw. */
  submitSeconds: number | null;
  /** Time spent queued (0 when released at once). */
  waitMs: number;
  /** The level it was released from; null when it was not queued or not released. */
  level: number | null;
  promoted: boolean;
  queued: boolean;
}

/**
 * The placement, already started, once the scheduler releases the request (at once when it can go); null if the
 * client went away while it waited. Rejects with QueueFullError (429) when the queue is full, `dropError` when the
 * scheduler drops the request, and NoCandidateError (as submit throws it) when no backend can take it.
 */
export function waitForAdmission (state: Pick<Placements, 'submit' | 'cancel'>, now: () => number, input: RoutingInput, abortable: Pick<Abortable, 'onAbort'>,
  priorityClass: number, report: (r: AdmissionReport) => void, dropError: (reason: DropReason, waitedMs: number) => Error): Promise<Placement | null> {
  return new Promise((resolve, reject) => {
    const d0 = now();
    let submitSeconds: number | null = null;
    const ended = (outcome: AdmissionOutcome, waitMs: number, level: number | null, promoted: boolean, queued: boolean): void => {
      report({ outcome, submittedAt: d0, submitSeconds, waitMs, level, promoted, queued });
    };
    let r;
    try {
      r = state.submit(input, {
        released: (p, info) => {
          abortable.onAbort = null;
          ended('released', info.waitMs, info.queued === false ? null : info.level, info.promoted, info.queued !== false);
          resolve(p);
        },
        dropped: (reason, t) => {
          abortable.onAbort = null;
          ended(reason === 'no_backend' ? 'no_candidate' : reason, t - d0, null, false, true);
          reject(dropError(reason, t - d0));
        },
        refused: (err) => {
          abortable.onAbort = null;
          ended(err instanceof QueueFullError ? 'queue_full' : err instanceof NoCandidateError ? 'no_candidate' : 'error', now() - d0, null, false, false);
          reject(err);
        }
      }, d0, priorityClass);
    } catch (err) {
      ended(err instanceof QueueFullError ? 'queue_full' : err instanceof NoCandidateError ? 'no_candidate' : 'error', now() - d0, null, false, false);
      reject(err);
      return;
    }
    submitSeconds = (now() - d0) / 1000;
    if (!('queued' in r)) {
      ended('released', 0, null, false, false);
      resolve(r);
      return;
    }
    const queued = r;
    // Released inside submit already: the waiter has resolved, nothing waits.
    abortable.onAbort = () => {
      if (!state.cancel(queued)) return;
      ended('cancelled', now() - d0, null, false, true);
      resolve(null);
    };
  });
}
