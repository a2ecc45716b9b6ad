// Entry of the kv-events thread: src/kvevents/kv-events-service.ts.
import { parentPort, workerData } from 'node:worker_threads';
import { startKvEventsService } from '../src/kvevents/kv-events-service.js';
import type { KvEventsThreadData } from '../src/kvevents/thread-protocol.js';

startKvEventsService(parentPort!, workerData as KvEventsThreadData);
