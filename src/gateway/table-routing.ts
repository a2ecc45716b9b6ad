// The gateway's adapter over the routing host (src/core/routing-host.ts): backends are pods (a backend's index
// is its pod row), its request path's bookkeeping calls go to the host unchanged, and health, reloads and
// engine scrapes become pod changes and engine reports. Nothing here decides anything. Main thread only.
import { RoutingHost, type Placement as HostPlacement } from '../core/routing-host.js';
import type { PodState } from '../core/pod-table.js';
import type { Policy } from '../core/policy.js';
import type { Region } from '../core/region.js';
import type { Backend } from './backends.js';
import type { EngineLoad } from './engine-metrics.js';
import type { Placement, RoutingInput, RoutingState } from './routing-state.js';
import type { Usage } from './stream-observer.js';

interface TablePlacement extends Placement {
  readonly host: HostPlacement;
}

export interface TableRoutingOptions {
  blockSize: number;
  sessionTtlMs: number;
  /** Session expiry: slots examined per routed request, so idle sessions go without a sweep. */
  sessionExpiryBudget?: number;
  /** A uniform draw in [0, 1) for policies that randomise (default Math.random; tests pass a seeded one). */
  random?: () => number;
  /** Called after every backendChanged (health probe, reload), e.g. to tell the kv-events thread which engines to follow. */
  onBackendChanged?: (b: Backend) => void;
}

export function podState (b: Backend): PodState {
  return b.draining ? 'draining' : b.health === 'healthy' ? 'ready' : 'down';
}

export class TableRouting implements RoutingState {
  readonly host: RoutingHost;
  readonly #backends: readonly Backend[];
  readonly #onChanged: ((b: Backend) => void) | null;

  constructor (region: Region, backends: readonly Backend[], policy: Policy, opts: TableRoutingOptions) {
    this.#backends = backends;
    this.#onChanged = opts.onBackendChanged ?? null;
    this.host = new RoutingHost(region, { policy, blockSize: opts.blockSize, sessionTtlMs: opts.sessionTtlMs, sessionExpiryBudget: opts.sessionExpiryBudget, random: opts.random });
    for (const b of backends) this.backendChanged(b, 0);
  }

  route (input: RoutingInput, exclude: ReadonlySet<number>, now: number, attempt = 0): Placement {
    const host = this.host.route(input, exclude, now, attempt);
    const p: TablePlacement = { backend: this.#backends[host.pod], reason: host.reason, expectedPrefill: host.expectedPrefill, decidedAt: now, host };
    return p;
  }

  hasCandidate (model: string, exclude: ReadonlySet<number>): boolean {
    return this.host.hasCandidate(model, exclude);
  }

  started (p: Placement, _input: RoutingInput, now: number): void {
    this.host.dispatched((p as TablePlacement).host, now);
  }

  firstToken (p: Placement, now: number): void {
    this.host.firstToken((p as TablePlacement).host, now);
  }

  finished (p: Placement, _input: RoutingInput, usage: Usage | null, _ok: boolean, now: number): void {
    this.host.finished((p as TablePlacement).host, usage && { promptTokens: usage.promptTokens, completionTokens: usage.completionTokens }, now);
  }

  session (sessionId: string): Record<string, unknown> | null {
    return this.host.session(sessionId) as Record<string, unknown> | null;
  }

  backendChanged (b: Backend, _now: number): void {
    this.host.setPod(b.index, { id: b.id, role: b.config.role, models: b.models, state: podState(b), kvCapacityBlocks: b.config.kvCapacityBlocks ?? 0 });
    this.#onChanged?.(b);
  }

  engineLoad (b: Backend, load: EngineLoad, now: number): void {
    this.host.engineLoad(b.index, load, now);
  }

  tableStats (): Array<{ table: string; entries: number; dropped: number }> {
    return this.host.tableStats();
  }
}
