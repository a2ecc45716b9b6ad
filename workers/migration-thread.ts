// The migration thread (ARCHITECTURE.md "Migration (EAR)"; ear-proactive only): watches load and sessions
// lock-free and moves idle sessions off hot pods (src/migration/proactive-loop.ts). It writes no table: a move
// is handed back to the main thread, the session table's writer. Messages: src/migration/thread-protocol.ts.
import { parentPort, workerData } from 'node:worker_threads';
import { Region } from '../src/core/region.js';
import { LoadTable } from '../src/core/load-table.js';
import { PodTable } from '../src/core/pod-table.js';
import { SessionTable } from '../src/core/session-table.js';
import { readEarProactiveKnobs } from '../src/core/policies/ear.js';
import { ProactivePlanner } from '../src/migration/proactive-planner.js';
import { ProactiveLoop } from '../src/migration/proactive-loop.js';
import { kvTransfersFor } from '../src/migration/transfers-for.js';
import type { FromMigrationThread, MigrationThreadData, ToMigrationThread } from '../src/migration/thread-protocol.js';

const data = workerData as MigrationThreadData;
const send = (m: FromMigrationThread): void => parentPort?.postMessage(m);
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
  send,
  now: () => performance.timeOrigin + performance.now()
});

parentPort?.on('message', (m: ToMigrationThread) => {
  try {
    if (m.type === 'body') loop.body(m.key, { sessionId: m.sessionId, model: m.model, path: m.path, body: m.body });
    else if (m.type === 'backends') loop.setBackends(m.backends);
    else if (m.type === 'stats') send({ type: 'reply', id: m.id, value: loop.stats() });
    else if (m.type === 'stop') {
      void loop.stop().then((s) => {
        send({ type: 'reply', id: m.id, value: s });
        parentPort?.close();
      });
    }
  } catch (err) {
    // A bad message must not end the thread: counted in the loop's errors, reported for the log.
    loop.error(`message ${m.type}: ${(err as Error).stack ?? String(err)}`);
  }
});
loop.start();
