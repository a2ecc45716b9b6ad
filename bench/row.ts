// One line of a benchmark table: the WASM kernel against its TypeScript reference, measured in one run.
export interface BenchRow {
  /** What was measured, e.g. 'xxHash64 over 64 KiB'. */
  op: string;
  /** Unit of the two figures, e.g. 'GB/s', 'ops/s', 'µs'. */
  unit: string;
  wasm: number;
  /** The TypeScript reference (or another baseline) in the same run; null if there is none. */
  reference: number | null;
  /** Higher or lower is better for this unit. */
  better: 'higher' | 'lower';
  /** The target for the WASM figure, if any, e.g. '≥ 3× reference' or '< 50 µs'. */
  target?: string;
  /** Whether the target is met (undefined when there is none). */
  met?: boolean;
}
