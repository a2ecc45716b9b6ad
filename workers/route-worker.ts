// Entry of a route pool thread (piscina calls the default export per task): src/features/route-service.ts.
import { workerData } from 'piscina';
import { createRouteService } from '../src/features/route-service.js';
import type { RouteWorkerData } from '../src/features/route-protocol.js';

export default createRouteService(workerData as RouteWorkerData);
