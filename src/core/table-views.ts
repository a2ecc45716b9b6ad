// What a policy sees of the shared tables, built in one place for every thread that reads them: the routing
// host's Router on the main thread, and the migration thread's planner (which reads the same tables lock-free
// from another thread). Only reads: every method used here is safe on any thread.
import type { LoadTable } from './load-table.js';
import type { PodTable } from './pod-table.js';
import type { SessionRecord, SessionTable } from './session-table.js';
import type { LoadView, PodView, SessionInfo, SessionView } from './policy.js';

export function loadViewOf (load: LoadTable): LoadView {
  return {
    inFlight: (p) => load.inFlight(p),
    pendingPrefill: (p) => load.pendingPrefill(p),
    running: (p) => load.running(p),
    waiting: (p) => load.waiting(p),
    kvUsage: (p) => load.kvUsage(p)
  };
}

/** A stored session as policies see it. */
export function sessionInfoOf (s: SessionRecord): SessionInfo {
  return { host: s.host, attainedService: s.attained, contextTokens: s.contextTokens, lastMigration: s.lastMigration, inFlight: s.inFlight };
}

export function sessionViewOf (sessions: SessionTable): SessionView {
  return {
    get (key): SessionInfo | null {
      const s = sessions.get(key);
      return s === undefined ? null : sessionInfoOf(s);
    }
  };
}

/** Decisions recorded for these pods (the shared counter round-robin and ear's rotation read). */
export function decisionsOf (load: LoadTable, pods: readonly PodView[]): number {
  let n = 0;
  for (const p of pods) n += load.decisions(p.index);
  return n;
}

/**
 * The pods that take whole requests, read from the pod table alone (another thread has no PodSpec): rows that
 * are ready and not prefill-only, with the block size and KV capacity the host wrote there. `idOf` names a row
 * (its backend id); a row it does not name is left out, as nothing could reach it. The model is not checked:
 * the pod table does not keep it (every row's model is 0), so this is the fleet of one model.
 */
export function servingPodViews (pods: PodTable, idOf: (row: number) => string | undefined): PodView[] {
  const out: PodView[] = [];
  for (let row = 0; row < pods.capacity; row++) {
    if (pods.state(row) !== 'ready') continue; // the cheap check first: most rows are absent
    const r = pods.get(row);
    if (r === undefined || r.state !== 'ready' || r.role === 'prefill') continue;
    const id = idOf(row);
    if (id === undefined) continue;
    out.push({ index: row, id, role: r.role, blockSize: r.blockSize, kvCapacityBlocks: r.kvBlocks });
  }
  return out;
}
