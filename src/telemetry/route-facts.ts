// What a route span records of one placement, the same for the gateway's request path and the endpoint picker's.
// Built only for a span that records: it walks the backends to count the candidates.
import type { RoutingFacts } from './tracing.js';
import type { Backend } from '../fleet/backends.js';
import type { Placement } from '../fleet/routing-port.js';

export function routeFacts (policy: string, backends: readonly Backend[], p: Placement, attempt: number, model: string, exclude: ReadonlySet<number>): RoutingFacts {
  let candidates = 0;
  for (const b of backends) if (b.models.has(model) && b.health === 'healthy' && !b.draining && !exclude.has(b.index)) candidates++;
  return {
    policy, pod: p.backend.id, reason: p.reason, attempt, decidedAt: p.decidedAt, candidates, matchedBlocks: p.matchedBlocks ?? null,
    migrateFrom: p.migrating === true && p.transferFrom ? p.transferFrom.id : null
  };
}
