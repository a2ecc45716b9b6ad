// A data-plane thread's local session table, for a shared store's turns (store/shared-sessions.ts): the table is
// the main thread's, its one writer, so a shared record is adopted by a message (owner-client.ts), sent before the
// thread's next submit or route and so applied before that decision; the figures a bind seeds and addService reports
// are the owner's answer, given after it applied what the thread sent before. Whether a shared host is ready here
// the thread reads from its copy of the backend list (the pod table's state, as table-routing.ts derives it).
import type { SharedSession } from '../store/session-store.js';
import type { LocalFigures, LocalSessions } from '../store/shared-sessions.js';
import { podState } from '../fleet/table-routing.js';
import type { OwnerClient } from './owner-client.js';

export class OwnerSessions implements LocalSessions {
  readonly remote = true;
  readonly #owner: OwnerClient;

  constructor (owner: OwnerClient) {
    this.#owner = owner;
  }

  ready (backendId: string): boolean {
    for (const b of this.#owner.backends) {
      if (b.id === backendId) return !b.gone && podState(b) === 'ready';
    }
    return false;
  }

  adopt (sessionId: string, s: SharedSession): boolean {
    this.#owner.adoptShared(sessionId, s);
    return s.host !== null && this.ready(s.host);
  }

  /** Never rejects: without an answer the store gets no figures (a hint, as a degraded store's reply is). */
  figures (sessionId: string): Promise<LocalFigures | undefined> {
    return this.#owner.sessionFigures(sessionId).catch(() => undefined);
  }
}
