// What a thread's protocol declares (src/migration/thread-protocol.ts, src/kvevents/thread-protocol.ts), and
// the envelopes its messages travel in between the parent (thread-client.ts) and the thread (thread-service.ts).
import type { Outcome } from './outcome.js';

export interface Protocol {
  /** The thread's workerData. */
  data: unknown;
  /** Requests the thread answers (one union, discriminated by `type`). */
  call: { type: string };
  /** Each request type's answer. */
  answers: { [type: string]: unknown };
  /** Messages to the thread that are not answered. */
  note: { type: string };
  /** Messages from the thread that answer nothing: its reports. */
  event: { type: string };
}

/** The answer to a request of type T. */
export type Answer<P extends Protocol, T extends P['call']['type']> = P['answers'][T];

/** Parent → thread: a request, answered under its id, or a note. */
export type ToThread<P extends Protocol> = { id: number; call: P['call'] } | { note: P['note'] };

/** Thread → parent: the outcome of the request with this id, or an event. */
export type FromThread<P extends Protocol> = ({ id: number } & Outcome<unknown>) | { event: P['event'] };
