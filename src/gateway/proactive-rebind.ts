// Applies a proactive move on the main thread (the session table's writer): the routing host's compare-and-set
// first (rebindIdle: dropped if a turn came, or the session migrated, while the KV was moving), then, with a
// shared session store, the store's casHost with migration: true, so two replicas never move one session
// twice. A lost store CAS (another replica moved or rebound it first) makes this replica follow the winner's
// record; the local table's migration count keeps the move it made meanwhile (a count, not a binding). A
// store that does not answer leaves the local move standing: the store is a hint.
import type { RoutingHost } from '../core/routing-host.js';
import type { SharedSessions } from '../store/shared-sessions.js';

export interface IdleMove {
  key: bigint;
  sessionId: string;
  from: number;
  to: number;
}

/** True if the session now lives on `to` here (moved); false if the move was dropped. */
export async function applyIdleMove (host: RoutingHost, shared: SharedSessions | null, m: IdleMove, now: () => number): Promise<boolean> {
  if (!host.rebindIdle(m.key, m.from, m.to, now())) return false;
  const fromId = host.pod(m.from)?.id;
  const toId = host.pod(m.to)?.id;
  if (shared === null || fromId === undefined || toId === undefined) return true;
  const r = await shared.store.casHost(m.sessionId, fromId, toId, now(), { migration: true });
  if (!r.ok || r.value.won) return true;
  if (r.value.session !== null) shared.adopt(m.sessionId, r.value.session);
  return false;
}
