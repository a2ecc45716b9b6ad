// Entry of a route pool thread (piscina calls the default export per task): src/gateway/route-service.ts.
import { workerData } from 'piscina';
import { createRouteService } from '../src/gateway/route-service.js';
import type { RouteWorkerData } from '../src/gateway/route-protocol.js';

export default createRouteService(workerData as RouteWorkerData);
