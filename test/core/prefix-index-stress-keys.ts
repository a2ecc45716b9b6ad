// Keys and pods of the prefix-index stress test, shared by the test and its workers. Every key's legal pods
// are a function of the key, so a reader can tell a torn read (a pod the key never had) from a real one.

export interface StressShape {
  /** Stable keys come in chains (longestPrefix walks them), each held by one pod, confirmed, never removed. */
  chains: number;
  chainLength: number;
  /** Churn keys are inserted and removed at full speed. */
  churnKeys: number;
}

/** Room for every key at once (no eviction, so no stable key may ever vanish), at a load up to 0.75. */
export function capacityOf (s: StressShape): number {
  return s.chains * s.chainLength + s.churnKeys;
}

/** splitmix64: distinct, well-spread, never 0 for these inputs. */
export function keyOf (i: number): bigint {
  let z = BigInt.asUintN(64, BigInt(i + 1) * 0x9E3779B97F4A7C15n);
  z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xBF58476D1CE4E5B9n);
  z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94D049BB133111EBn);
  return z ^ (z >> 31n);
}

/**
 * Stable key i is held by exactly two pods: its chain's (0..63, so longestPrefix matches the whole chain) and
 * its own (64..127, different from its neighbours', so a read that mixes two keys shows up).
 */
export function stablePods (s: StressShape, i: number): [number, number] {
  return [Math.floor(i / s.chainLength) % 64, 64 + (i % 64)];
}

/** Stable key indices of reader walk c: chain c repeated `repeat` times (long walks keep readers in WASM). */
export function walkOf (s: StressShape, c: number, repeat: number): number[] {
  return Array.from({ length: s.chainLength * repeat }, (_, t) => c * s.chainLength + (t % s.chainLength));
}

/** What longestPrefix must report for a walk: per pod, its leading blocks. */
export function walkCounts (s: StressShape, walk: number[]): Uint32Array {
  const counts = new Uint32Array(256);
  for (let pod = 0; pod < 128; pod++) {
    let n = 0;
    while (n < walk.length && stablePods(s, walk[n]).includes(pod)) n++;
    counts[pod] = n;
  }
  return counts;
}

export function churnKey (s: StressShape, j: number): bigint {
  return keyOf(s.chains * s.chainLength + j);
}

/** Churn key j may only ever be held by these two pods (128..255). */
export function churnPods (j: number): [number, number] {
  return [128 + (j % 64), 192 + (j % 64)];
}

/** The least work the stress test asserts of each thread; the writer goes on past its time until all have done it. */
export const ENOUGH = { writerOps: 10_000, churnDeletes: 1000, lookups: 1000, prefixes: 100 };
