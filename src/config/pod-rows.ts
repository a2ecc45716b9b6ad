// The pod rows of the shared tables (docs/architecture.md#pod-rows): one per backend, leased while it serves and
// until its purge completes. Fixed at start: the pod table, the load table and the prefix index's presence are
// laid out for them (asm/), so a change needs a restart.
import { DEFAULT_REGION_CONFIG } from '../core/region.js';
import { layoutConstant } from '../core/wasm.js';
import { checkInt, type FieldCheck } from './checks.js';

export interface PodRowsConfig {
  /**
   * Pod rows: backends that can hold a row at once, serving or draining. A backend that finds every row taken
   * waits for one (ear_pod_rows_waiting); discovery.maxPods follows it unless set lower.
   */
  maxPods: number;
}

export const POD_ROWS_DEFAULTS: Readonly<PodRowsConfig> = Object.freeze({ maxPods: DEFAULT_REGION_CONFIG.pods });

/** The largest maxPods: asm/layout.ts POD_ROWS_MAX. */
export function maxPodRows (): number {
  return layoutConstant('POD_ROWS_MAX');
}

export const POD_ROWS_FIELDS: Record<keyof PodRowsConfig, FieldCheck> = {
  maxPods: (p, v) => checkInt(p, v, 1, maxPodRows())
};
