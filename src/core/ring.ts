// Typed views of the record ring (asm/ring.ts): RingProducer for any thread that records (route workers, main),
// RingConsumer for the single consumer, the kv-events thread. Each view owns a scratch area of its thread.
// Every op carries its pod row's lease (asm/pod-table.ts): pass the lease the decision was made under (a
// placement keeps it); left out, it is the row's lease at the push, which is the same thing only for the pod
// table's writer (the main thread) pushing in the tick it decided.
import type { Region } from './region.js';

export type RingOpcode = 'assumed' | 'touch' | 'forgetPod';

/** One op as delivered: a and b are raw u64 arguments (for assumed/touch, a holds the time's f64 bits). */
export interface RingOp {
  opcode: number;
  pod: number;
  key: bigint;
  a: bigint;
  b: bigint;
  /** The pod row's lease the op was decided under (u32). */
  lease: number;
}

export interface RingStats {
  capacity: number;
  size: number;
  dropped: number;
  popped: number;
}

/** The opcodes and op layout, read from the kernels' exports. */
export function ringLayout (region: Region) {
  return {
    opcodes: {
      assumed: region.const('RING_OPCODE_ASSUMED'),
      touch: region.const('RING_OPCODE_TOUCH'),
      forgetPod: region.const('RING_OPCODE_FORGET_POD')
    } as Record<RingOpcode, number>,
    opBytes: region.const('RING_OP_BYTES'),
    /** Header offset of the producers' claim counter: it changes with every push, so a consumer can wait on it. */
    tail: region.const('RING_H_TAIL'),
    /** Header offset of the word that is 1 while the consumer waits on the tail (asm/ring.ts: producers notify only then). */
    sleeping: region.const('RING_H_SLEEPING'),
    opcode: region.const('RING_OP_OPCODE'),
    pod: region.const('RING_OP_POD'),
    key: region.const('RING_OP_KEY'),
    a: region.const('RING_OP_A'),
    b: region.const('RING_OP_B'),
    lease: region.const('RING_OP_LEASE'),
    reserved: region.const('RING_OP_RESERVED')
  };
}

function ringStats (region: Region, base: number): RingStats {
  const u64 = (name: string) => Number(Atomics.load(region.u64, (base + region.const(name)) >>> 3));
  return {
    capacity: region.u32[(base + region.const('RING_H_CAPACITY')) >>> 2],
    size: region.fn<(b: number) => number>('ringSize')(base) >>> 0,
    dropped: u64('RING_H_DROPPED'),
    popped: u64('RING_H_POPPED')
  };
}

/** Pushes ops; any thread, any number of producers. */
export class RingProducer {
  readonly layout: ReturnType<typeof ringLayout>;
  readonly #r: Region;
  readonly #base: number;
  readonly #ptr: number;
  readonly #keyCap: number;
  readonly #podsBase: number;
  /** i32 indexes of the ring's tail and its consumer's sleeping word. */
  readonly #tail: number;
  readonly #sleeping: number;
  readonly #push: (base: number, src: number) => number;
  readonly #pushKeys: (base: number, opcode: number, pod: number, keys: number, n: number, time: number, first: number, lease: number) => number;
  readonly #lease: (podsBase: number, pod: number) => number;

  /** `scratch` is this thread's own area (at least RING_OP_BYTES); by default one is claimed. */
  constructor (region: Region, scratch: { ptr: number; bytes: number } = region.claimScratch()) {
    this.#r = region;
    this.#base = region.base('TABLE_RECORD_RING');
    this.layout = ringLayout(region);
    if (scratch.bytes < this.layout.opBytes) throw new RangeError(`ring scratch needs at least ${this.layout.opBytes} bytes`);
    this.#ptr = scratch.ptr;
    this.#keyCap = Math.floor(scratch.bytes / 8);
    this.#podsBase = region.base('TABLE_PODS');
    this.#tail = (this.#base + this.layout.tail) >>> 2;
    this.#sleeping = (this.#base + this.layout.sleeping) >>> 2;
    this.#push = region.fn('ringPush');
    this.#pushKeys = region.fn('ringPushKeys');
    this.#lease = region.fn('podsLease');
  }

  /** Any thread: the pod row's lease now (0 for a row outside the pod table). */
  lease (pod: number): number {
    return this.#lease(this.#podsBase, pod) >>> 0;
  }

  /** Pushes one op. False if the ring was full: the op is dropped and counted. */
  push (opcode: number, pod: number, key: bigint, a: bigint, b: bigint, lease: number = this.lease(pod)): boolean {
    const { u32, u64 } = this.#r;
    const L = this.layout;
    const p = this.#ptr;
    u32[(p + L.opcode) >>> 2] = opcode;
    u32[(p + L.pod) >>> 2] = pod;
    u64[(p + L.key) >>> 3] = key;
    u64[(p + L.a) >>> 3] = a;
    u64[(p + L.b) >>> 3] = b;
    u32[(p + L.lease) >>> 2] = lease;
    u32[(p + L.reserved) >>> 2] = 0;
    const ok = this.#push(this.#base, p) === 1;
    if (ok) this.#wake();
    return ok;
  }

  /**
   * Wakes a consumer waiting in RingConsumer.waitForOps, only while it says it waits: a notify that finds a waiter
   * costs µs (V8 hands the wake to the waiter's thread), one that finds none still takes V8's waiter-list lock.
   */
  #wake (): void {
    const i32 = this.#r.i32;
    if (Atomics.load(i32, this.#sleeping) !== 0) Atomics.notify(i32, this.#tail);
  }

  /**
   * Records block keys already in shared memory (n u64 at `keysPtr`, e.g. the hasher's output): one op each,
   * a = time, b = firstPosition + i, all stamped with `lease`. Keeps the first ops that fit; returns how many
   * were pushed.
   */
  pushKeysAt (opcode: number, pod: number, keysPtr: number, n: number, time: number, firstPosition = 0, lease: number = this.lease(pod)): number {
    const pushed = this.#pushKeys(this.#base, opcode, pod, keysPtr, n, time, firstPosition, lease) >>> 0;
    // Nothing pushed (no keys: a prompt shorter than a block; or a full ring, whose consumer is awake): nothing to wake
    // it for. A notify that wakes it for nothing cost the main thread ~4 µs and the kv-events thread a turn.
    if (pushed > 0) this.#wake();
    return pushed;
  }

  /** Like pushKeysAt for keys held in JS; they are copied through this view's scratch area. */
  pushKeys (opcode: number, pod: number, keys: BigUint64Array | bigint[], time: number, firstPosition = 0, lease: number = this.lease(pod)): number {
    let pushed = 0;
    for (let i = 0; i < keys.length; i += this.#keyCap) {
      const n = Math.min(this.#keyCap, keys.length - i);
      const view = new BigUint64Array(this.#r.memory.buffer, this.#ptr, n);
      for (let j = 0; j < n; j++) view[j] = keys[i + j];
      const k = this.pushKeysAt(opcode, pod, this.#ptr, n, time, firstPosition + i, lease);
      pushed += k;
      if (k < n) {
        // The ring is full: what is left is dropped and counted like the kernel's own tail.
        const rest = keys.length - i - n;
        if (rest > 0) Atomics.add(this.#r.u64, (this.#base + this.#r.const('RING_H_DROPPED')) >>> 3, BigInt(rest));
        break;
      }
    }
    return pushed;
  }

  /** Any thread. */
  stats (): RingStats {
    return ringStats(this.#r, this.#base);
  }
}

/** Takes ops out; the single consumer (the kv-events thread) only. */
export class RingConsumer {
  readonly layout: ReturnType<typeof ringLayout>;
  readonly #r: Region;
  readonly #base: number;
  readonly #out: number;
  readonly #maxOps: number;
  readonly #pop: (base: number, out: number, max: number) => number;

  /** `scratch` receives popped ops; its size bounds one pop. By default one is claimed. */
  constructor (region: Region, scratch: { ptr: number; bytes: number } = region.claimScratch()) {
    this.#r = region;
    this.#base = region.base('TABLE_RECORD_RING');
    this.layout = ringLayout(region);
    this.#out = scratch.ptr;
    this.#maxOps = Math.floor(scratch.bytes / this.layout.opBytes);
    if (this.#maxOps < 1) throw new RangeError(`ring scratch needs at least ${this.layout.opBytes} bytes`);
    this.#pop = region.fn('ringPop');
  }

  /** The ring's base offset (for kernels that pop on their own, e.g. ixApplyRing). */
  get base (): number {
    return this.#base;
  }

  /** The producers' claim counter now: read it before a pop that may find the ring empty, then waitForOps(it). */
  tail (): number {
    return Atomics.load(this.#r.i32, (this.#base + this.layout.tail) >>> 2);
  }

  /**
   * Resolves once a producer has pushed since `tail` was read (at once if one already has), or after `timeoutMs`.
   * Producers wake it (a RingProducer notifies after a push while this consumer waits), so an idle consumer costs
   * no polling. One wait at a time (the one consumer).
   */
  waitForOps (tail: number, timeoutMs: number): Promise<unknown> {
    const i32 = this.#r.i32;
    const sleeping = (this.#base + this.layout.sleeping) >>> 2;
    // Said before the wait compares the tail (asm/ring.ts: a push either sees it or moved the tail first).
    Atomics.store(i32, sleeping, 1);
    const r = Atomics.waitAsync(i32, (this.#base + this.layout.tail) >>> 2, tail, timeoutMs);
    if (!r.async) {
      Atomics.store(i32, sleeping, 0);
      return Promise.resolve(r.value);
    }
    return r.value.then((v) => {
      Atomics.store(i32, sleeping, 0);
      return v;
    });
  }

  /** Ops one pop can hold in this consumer's area. */
  get maxOps (): number {
    return this.#maxOps;
  }

  /** Where popped op i lies: `outPtr + i * layout.opBytes`, valid until the next pop. */
  get outPtr (): number {
    return this.#out;
  }

  /** Moves up to `max` ops (bounded by the scratch area) to outPtr, in order; returns how many. */
  pop (max = this.#maxOps): number {
    return this.#pop(this.#base, this.#out, Math.min(max, this.#maxOps)) >>> 0;
  }

  /** Decodes op i of the last pop. */
  op (i: number): RingOp {
    const { u32, u64 } = this.#r;
    const L = this.layout;
    const p = this.#out + i * L.opBytes;
    return {
      opcode: u32[(p + L.opcode) >>> 2],
      pod: u32[(p + L.pod) >>> 2],
      key: u64[(p + L.key) >>> 3],
      a: u64[(p + L.a) >>> 3],
      b: u64[(p + L.b) >>> 3],
      lease: u32[(p + L.lease) >>> 2]
    };
  }

  /** Pops until the ring is empty or `limit` ops were taken, passing each op to `visit`; returns how many. */
  drain (visit: (op: RingOp) => void, limit = Infinity): number {
    let total = 0;
    for (let n = this.pop(Math.min(limit, this.#maxOps)); n > 0; n = this.pop(Math.min(limit - total, this.#maxOps))) {
      for (let i = 0; i < n; i++) visit(this.op(i));
      total += n;
    }
    return total;
  }

  /** Any thread. */
  stats (): RingStats {
    return ringStats(this.#r, this.#base);
  }
}

/** The f64 time carried in an op argument (assumed/touch). */
export function opTime (bits: bigint): number {
  return new Float64Array(new BigUint64Array([bits]).buffer)[0];
}
