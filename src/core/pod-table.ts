// Typed view of the pod table (asm/pod-table.ts). set/setState/remove/release belong to the single writer, the
// main thread; get/state/generation/lease are safe on any thread. Strings (URLs, names) stay in JS keyed by pod id.
// A row is leased to a backend (src/core/pod-rows.ts allocates rows): release() ends the lease for good.
import type { Region } from './region.js';

export type PodState = 'ready' | 'draining' | 'down';
export type PodRole = 'both' | 'prefill' | 'decode';

export interface PodRecord {
  state: PodState;
  role: PodRole;
  blockSize: number;
  kvBlocks: number;
  model: number;
  /** Bumped on every change to this pod. */
  generation: number;
  /** The row's lease: bumped only when the row is released (see release). */
  lease: number;
}

export class PodTable {
  readonly #r: Region;
  readonly #base: number;
  readonly #out: number;
  readonly #capacity: number;
  readonly #states: Record<PodState | 'absent', number>;
  readonly #roles: Record<PodRole, number>;
  readonly #stateNames: Map<number, PodState>;
  readonly #roleNames: Map<number, PodRole>;
  readonly #f: { role: number; state: number; blockSize: number; kvBlocks: number; model: number; generation: number; lease: number };
  readonly #set: (base: number, pod: number, state: number, role: number, bs: number, kv: number, model: number) => number;
  readonly #setState: (base: number, pod: number, state: number) => number;
  readonly #state: (base: number, pod: number) => number;
  readonly #get: (base: number, pod: number, out: number) => number;
  readonly #generation: (base: number) => number;
  readonly #release: (base: number, pod: number) => number;
  readonly #lease: (base: number, pod: number) => number;

  /** `out` is this thread's copy area (PODS_RECORD_BYTES, exclusive to this view); by default one is claimed. */
  constructor (region: Region, out: number = region.claimScratch().ptr) {
    this.#r = region;
    this.#base = region.base('TABLE_PODS');
    this.#out = out;
    this.#capacity = region.u32[(this.#base + region.const('PODS_H_CAPACITY')) >>> 2];
    this.#states = {
      absent: region.const('POD_STATE_ABSENT'),
      ready: region.const('POD_STATE_READY'),
      draining: region.const('POD_STATE_DRAINING'),
      down: region.const('POD_STATE_DOWN')
    };
    this.#roles = { both: region.const('POD_ROLE_BOTH'), prefill: region.const('POD_ROLE_PREFILL'), decode: region.const('POD_ROLE_DECODE') };
    this.#stateNames = new Map((['ready', 'draining', 'down'] as PodState[]).map((s) => [this.#states[s], s]));
    this.#roleNames = new Map((Object.keys(this.#roles) as PodRole[]).map((r) => [this.#roles[r], r]));
    this.#f = {
      state: region.const('PODS_F_STATE'),
      role: region.const('PODS_F_ROLE'),
      blockSize: region.const('PODS_F_BLOCK_SIZE'),
      kvBlocks: region.const('PODS_F_KV_BLOCKS'),
      model: region.const('PODS_F_MODEL'),
      generation: region.const('PODS_F_GENERATION'),
      lease: region.const('PODS_F_LEASE')
    };
    this.#set = region.fn('podsSet');
    this.#setState = region.fn('podsSetState');
    this.#state = region.fn('podsState');
    this.#get = region.fn('podsGet');
    this.#generation = region.fn('podsGeneration');
    this.#release = region.fn('podsRelease');
    this.#lease = region.fn('podsLease');
  }

  /** Pod ids are integers in [0, capacity). */
  get capacity (): number {
    return this.#capacity;
  }

  /** Any thread: bumped on every change to any pod (rebuild what is derived from the pod list when it moves). */
  get generation (): number {
    return this.#generation(this.#base) >>> 0;
  }

  #checkPod (pod: number): void {
    if (!Number.isInteger(pod) || pod < 0 || pod >= this.#capacity) {
      throw new RangeError(`pod id ${pod} is outside [0, ${this.#capacity})`);
    }
  }

  /** Writer: sets a pod's fields (registers it if absent). */
  set (pod: number, p: Omit<PodRecord, 'generation' | 'lease'>): void {
    this.#checkPod(pod);
    const state = this.#states[p.state];
    const role = this.#roles[p.role];
    if (state === undefined || role === undefined) throw new RangeError(`unknown pod state ${p.state} or role ${p.role}`);
    for (const [k, v] of [['blockSize', p.blockSize], ['kvBlocks', p.kvBlocks], ['model', p.model]] as const) {
      if (!Number.isInteger(v) || v < 0 || v > 0xFFFFFFFF) throw new RangeError(`pod ${k} must be a u32, got ${v}`);
    }
    this.#set(this.#base, pod, state, role, p.blockSize, p.kvBlocks, p.model);
  }

  /** Writer: changes a pod's state. */
  setState (pod: number, state: PodState): void {
    this.#checkPod(pod);
    const s = this.#states[state];
    if (s === undefined) throw new RangeError(`unknown pod state ${state}`);
    this.#setState(this.#base, pod, s);
  }

  /** Writer: removes a pod (its row reads as absent) and keeps its lease: the same backend may come back. */
  remove (pod: number): void {
    this.#checkPod(pod);
    this.#setState(this.#base, pod, this.#states.absent);
  }

  /**
   * Writer: ends the row's lease (its backend left for good): the row reads as absent, every field zero, and the
   * lease moves on, so the ring's consumer drops every op still stamped with the old one. The first step of a
   * row's release (see src/core/pod-rows.ts); returns the new lease.
   */
  release (pod: number): number {
    this.#checkPod(pod);
    this.#release(this.#base, pod);
    return this.#lease(this.#base, pod) >>> 0;
  }

  /** Any thread: the row's lease now (what ops about this pod are stamped with). */
  lease (pod: number): number {
    this.#checkPod(pod);
    return this.#lease(this.#base, pod) >>> 0;
  }

  /** Any thread: a pod's state, or undefined if absent or out of range. */
  state (pod: number): PodState | undefined {
    return this.#stateNames.get(this.#state(this.#base, pod));
  }

  /** Any thread: a consistent copy of the pod, or undefined if absent or out of range. */
  get (pod: number): PodRecord | undefined {
    if (this.#get(this.#base, pod, this.#out) !== 1) return undefined;
    const u32 = this.#r.u32;
    const at = (off: number) => u32[(this.#out + off) >>> 2];
    return {
      state: this.#stateNames.get(at(this.#f.state))!,
      role: this.#roleNames.get(at(this.#f.role))!,
      blockSize: at(this.#f.blockSize),
      kvBlocks: at(this.#f.kvBlocks),
      model: at(this.#f.model),
      generation: at(this.#f.generation),
      lease: at(this.#f.lease)
    };
  }
}
