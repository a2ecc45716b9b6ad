// The migration thread's work (started by workers/migration-thread.ts; docs/architecture.md#migration;
// ear-proactive only): watches load and sessions lock-free and moves idle sessions off hot pods
// (src/migration/proactive-loop.ts). It writes no table: a move is handed back to the main thread, the session
// table's writer. Messages: src/migration/thread-protocol.ts.
import type { MessagePort } from 'node:worker_threads';
import { Region } from '../core/region.js';
import { LoadTable } from '../core/load-table.js';
import { PodTable } from '../core/pod-table.js';
import { SessionTable } from '../core/session-table.js';
import { readEarProactiveKnobs } from '../core/policies/ear.js';
import { eventSender, serveThread } from '../threads/thread-service.js';
import { ProactivePlanner } from './proactive-planner.js';
import { ProactiveLoop } from './proactive-loop.js';
import { kvTransfersFor } from './transfers-for.js';
import type { MigrationProtocol, MigrationThreadData } from './thread-protocol.js';

/** Runs the migration thread over `port` (the parent's) until it is asked to stop. */
export function startMigrationService (port: MessagePort, data: MigrationThreadData): void {
  const region = new Region(data.shared);
  // One scratch area for both readers' copy areas: the session record first, the pod record after it.
  const area = region.claimScratch();
  const sessions = new SessionTable(region, area.ptr);
  const pods = new PodTable(region, area.ptr + 256);
  const load = new LoadTable(region);
  const planner = new ProactivePlanner({ sessions, load, pods }, readEarProactiveKnobs(data.policyConfig));
  const loop = new ProactiveLoop({
    planner,
    transfers: kvTransfersFor(data.transfers),
    bodyCacheBytes: data.bodyCacheBytes,
    intervalMs: data.intervalMs,
    upstream: data.upstream,
    send: eventSender<MigrationProtocol>(port),
    now: () => performance.timeOrigin + performance.now()
  });

  serveThread<MigrationProtocol>(port, {
    calls: {
      stats: () => loop.stats(),
      stop: () => loop.stop()
    },
    notes: {
      body: (m) => loop.body(m.key, { sessionId: m.sessionId, model: m.model, path: m.path, body: m.body }),
      backends: (m) => loop.setBackends(m.backends)
    },
    closesOn: 'stop',
    // A bad message must not end the thread: counted in the loop's errors, reported for the log.
    onError: (err, type) => loop.error(`message ${type}: ${(err as Error).stack ?? String(err)}`)
  });
  loop.start();
}
