// The shared region: one WebAssembly.Memory holding every table, found by other threads through the directory
// at offset 0 (asm/layout.ts). The creating thread lays the tables out and initialises them, then shares
// { memory, module } with the other threads, which attach without writing anything but their scratch claim.
import { constant, coreModule, createSharedMemory, instantiateCore, kernel, layoutConstant, type CoreExports } from './wasm.js';
import { MAX_SESSIONS, PREFIX_INDEX_KEYS } from './defaults.js';

/** Capacities of the tables. Each has a bound; what happens at the bound is documented with the table. */
export interface RegionConfig {
  /** Prefix index capacity in keys (blocks). */
  prefixIndexKeys: number;
  /** Session table capacity in sessions. */
  sessions: number;
  /** Admission heap capacity in waiting jobs. */
  heapJobs: number;
  /** Record ring capacity in ops (rounded up to a power of two). */
  recordRingOps: number;
  /**
   * Pod rows: what the pod and load tables hold and the prefix index's presence covers (config maxPods), in
   * [1, asm/layout.ts POD_ROWS_MAX].
   */
  pods: number;
  /** Per-thread scratch areas for passing token arrays and keys to the kernels. */
  scratchSlots: number;
  scratchBytes: number;
}

export const DEFAULT_REGION_CONFIG: Readonly<RegionConfig> = Object.freeze({
  prefixIndexKeys: PREFIX_INDEX_KEYS,
  sessions: MAX_SESSIONS,
  heapJobs: 1 << 16,
  recordRingOps: 1 << 16,
  pods: 256,
  scratchSlots: 32,
  scratchBytes: 4 << 20
});

/** Everything another thread needs to attach: both values pass through postMessage / workerData as they are. */
export interface SharedRegion {
  memory: WebAssembly.Memory;
  module: WebAssembly.Module;
}

/**
 * A table whose kernels follow the convention `<prefix>Bytes(capacity)` and `<prefix>Init(base, capacity)`, or
 * with `byRows`, `<prefix>Bytes(capacity, pods)` and `<prefix>Init(base, capacity, pods)`: a table keyed by
 * something else whose entries also cover every pod row.
 */
interface TableSpec { id: string; prefix: string; capacity: (c: RegionConfig) => number; byRows?: boolean }

const TABLES: TableSpec[] = [
  { id: 'TABLE_PREFIX_INDEX', prefix: 'ix', capacity: (c) => c.prefixIndexKeys, byRows: true },
  { id: 'TABLE_SESSIONS', prefix: 'sess', capacity: (c) => c.sessions },
  { id: 'TABLE_HEAP', prefix: 'heap', capacity: (c) => c.heapJobs },
  { id: 'TABLE_RECORD_RING', prefix: 'ring', capacity: (c) => c.recordRingOps },
  { id: 'TABLE_PODS', prefix: 'pods', capacity: (c) => c.pods },
  { id: 'TABLE_LOAD', prefix: 'load', capacity: (c) => c.pods }
];

function alignUp (n: number, a: number): number {
  return Math.ceil(n / a) * a;
}

/** Where the tables go in `k`'s memory (each base written to the directory) and their inits, and where they end. */
function layTables (cfg: RegionConfig, k: CoreExports, u32: Uint32Array): { end: number; inits: Array<() => void> } {
  const maxRows = layoutConstant('POD_ROWS_MAX');
  if (!Number.isInteger(cfg.pods) || cfg.pods < 1 || cfg.pods > maxRows) {
    throw new RangeError(`pod rows must be an integer in [1, ${maxRows}], got ${cfg.pods}`);
  }
  const align = constant(k, 'TABLE_ALIGN');
  const dirTables = constant(k, 'DIR_TABLES');
  let end = constant(k, 'DIR_BYTES');
  const inits: Array<() => void> = [];
  for (const t of TABLES) {
    if (typeof k[`${t.prefix}Bytes`] !== 'function') continue;
    const capacity = t.capacity(cfg);
    const rows = t.byRows === true ? [cfg.pods] : [];
    const bytes = kernel<(c: number, ...rows: number[]) => number>(k, `${t.prefix}Bytes`)(capacity, ...rows) >>> 0;
    const base = alignUp(end, align);
    end = base + bytes;
    u32[(dirTables + 4 * constant(k, t.id)) >>> 2] = base;
    inits.push(() => kernel<(b: number, c: number, ...rows: number[]) => void>(k, `${t.prefix}Init`)(base, capacity, ...rows));
  }
  return { end, inits };
}

/**
 * Creates a memory, lays out every table whose kernels the module exports, and initialises them.
 * Throws if the tables do not fit the host region (asm/layout.ts HOST_REGION_BYTES).
 */
export function createRegion (config: Partial<RegionConfig> = {}, module: WebAssembly.Module = coreModule()): SharedRegion {
  const cfg: RegionConfig = { ...DEFAULT_REGION_CONFIG, ...config };
  const memory = createSharedMemory();
  const k = instantiateCore(memory, module);
  const u32 = new Uint32Array(memory.buffer);
  const align = constant(k, 'TABLE_ALIGN');
  const hostBytes = constant(k, 'HOST_REGION_BYTES');
  const dirTables = constant(k, 'DIR_TABLES');
  const tables = layTables(cfg, k, u32);
  const scratchBase = alignUp(tables.end, align);
  const scratchBytes = alignUp(cfg.scratchBytes, align);
  const end = scratchBase + cfg.scratchSlots * scratchBytes;
  if (end > hostBytes) {
    throw new RangeError(`tables need ${end} bytes but the host region holds ${hostBytes}: lower the capacities`);
  }
  u32[(dirTables + 4 * constant(k, 'TABLE_SCRATCH')) >>> 2] = scratchBase;
  for (const init of tables.inits) init();
  // Scratch geometry sits after the table slots, in the directory.
  const scratchInfo = (dirTables + 4 * constant(k, 'DIR_TABLE_SLOTS')) >>> 2;
  u32[scratchInfo] = cfg.scratchSlots;
  u32[scratchInfo + 1] = scratchBytes;
  u32[constant(k, 'DIR_END') >>> 2] = end;
  u32[constant(k, 'DIR_VERSION') >>> 2] = constant(k, 'LAYOUT_VERSION');
  Atomics.store(u32, constant(k, 'DIR_MAGIC') >>> 2, constant(k, 'DIR_MAGIC_VALUE'));
  return { memory, module };
}

/**
 * How many scratch areas (of `config.scratchBytes`) fit after the tables of these capacities: what createRegion
 * would accept as `scratchSlots` (0 when the tables alone do not fit). Lays the tables out in a memory of its own,
 * initialising nothing (~1 ms).
 */
export function scratchRoom (config: Partial<RegionConfig> = {}, module: WebAssembly.Module = coreModule()): number {
  const cfg: RegionConfig = { ...DEFAULT_REGION_CONFIG, ...config };
  const memory = createSharedMemory();
  const k = instantiateCore(memory, module);
  const align = constant(k, 'TABLE_ALIGN');
  const { end } = layTables(cfg, k, new Uint32Array(memory.buffer));
  return Math.max(0, Math.floor((constant(k, 'HOST_REGION_BYTES') - alignUp(end, align)) / alignUp(cfg.scratchBytes, align)));
}

/** A thread's handle on the region: its own instance of the kernels and the table bases. */
export class Region {
  readonly memory: WebAssembly.Memory;
  readonly module: WebAssembly.Module;
  readonly k: CoreExports;
  readonly u8: Uint8Array;
  readonly u32: Uint32Array;
  readonly i32: Int32Array;
  readonly f64: Float64Array;
  readonly u64: BigUint64Array;
  readonly #bases = new Map<string, number>();

  constructor (shared: SharedRegion) {
    this.memory = shared.memory;
    this.module = shared.module;
    this.k = instantiateCore(shared.memory, shared.module);
    const buf = shared.memory.buffer;
    this.u8 = new Uint8Array(buf);
    this.u32 = new Uint32Array(buf);
    this.i32 = new Int32Array(buf);
    this.f64 = new Float64Array(buf);
    this.u64 = new BigUint64Array(buf);
    if (Atomics.load(this.u32, this.const('DIR_MAGIC') >>> 2) !== this.const('DIR_MAGIC_VALUE')) {
      throw new Error('shared memory holds no EAR region (createRegion first)');
    }
    if (this.u32[this.const('DIR_VERSION') >>> 2] !== this.const('LAYOUT_VERSION')) {
      throw new Error('shared region was laid out by another build of the kernels');
    }
  }

  /** An exported layout constant. */
  const (name: string): number {
    return constant(this.k, name);
  }

  /** An exported kernel function. */
  fn<F extends (...args: any[]) => any> (name: string): F {
    return kernel<F>(this.k, name);
  }

  /** Base offset of a table by its directory id name (e.g. 'TABLE_PREFIX_INDEX'); throws if it was not laid out. */
  base (tableId: string): number {
    let b = this.#bases.get(tableId);
    if (b === undefined) {
      b = this.u32[(this.const('DIR_TABLES') + 4 * this.const(tableId)) >>> 2];
      if (!b) throw new Error(`${tableId} is not in this region`);
      this.#bases.set(tableId, b);
    }
    return b;
  }

  /**
   * Claims a scratch area for this thread's exclusive use (token arrays in, keys out). Claims are never returned:
   * a thread claims once at start. At the bound it throws, naming the setting to raise.
   */
  claimScratch (): { ptr: number; bytes: number } {
    const info = (this.const('DIR_TABLES') + 4 * this.const('DIR_TABLE_SLOTS')) >>> 2;
    const slots = this.u32[info];
    const bytes = this.u32[info + 1];
    const i = Atomics.add(this.u32, this.const('DIR_SCRATCH_NEXT') >>> 2, 1);
    if (i >= slots) throw new RangeError(`all ${slots} scratch areas are claimed (raise scratchSlots)`);
    return { ptr: this.base('TABLE_SCRATCH') + i * bytes, bytes };
  }
}

/** Creates a region and attaches to it on this thread. */
export function createAndAttach (config: Partial<RegionConfig> = {}): Region {
  return new Region(createRegion(config));
}

/** What the pod rows cost in the shared region, from the kernels' own layout functions. */
export interface PodRowsCost {
  rows: number;
  /** Bytes of the pod table, the load table and the prefix index's per-row part (loss epochs, voided-at times and loss rings, whole groups). */
  bytes: number;
  /** The whole region as laid out (every table and the scratch areas). */
  regionBytes: number;
}

/** The pod rows of an attached region and the shared memory they cost (logged at start, docs/configuration.md). */
export function podRowsCost (region: Region): PodRowsCost {
  const rows = region.u32[(region.base('TABLE_PODS') + region.const('PODS_H_CAPACITY')) >>> 2];
  const bytes = (f: string, ...args: number[]): number => region.fn<(...a: number[]) => number>(f)(...args) >>> 0;
  // The index's per-row part: its size with these rows less its size with one group's rows, plus that group's
  // (a loss epoch, a voided-at time and a loss ring a row).
  const indexRows = bytes('ixBytes', 1, rows) - bytes('ixBytes', 1, 1) + (8 + 8 * bytes('ixLossRing', 1)) * region.const('IX_GROUP_PODS');
  return { rows, bytes: bytes('podsBytes', rows) + bytes('loadBytes', rows) + indexRows, regionBytes: region.u32[region.const('DIR_END') >>> 2] };
}
