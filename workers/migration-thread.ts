// Entry of the migration thread: src/migration/migration-service.ts.
import { parentPort, workerData } from 'node:worker_threads';
import { startMigrationService } from '../src/migration/migration-service.js';
import type { MigrationThreadData } from '../src/migration/thread-protocol.js';

startMigrationService(parentPort!, workerData as MigrationThreadData);
