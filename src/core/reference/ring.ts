// Plain TypeScript bounded FIFO of ops with the single-thread semantics of asm/ring.ts: capacity rounded up to
// a power of two, a push on a full ring drops the op and counts it, a bulk push keeps the ops that fit; each op
// carries its lease. Test oracle and bench baseline (it is not shared between threads). The consumer's lease
// check (asm/ring-apply.ts) is `applyLeased` below.
import type { RingOp } from '../ring.js';

export class ReferenceRing {
  readonly capacity: number;
  dropped = 0;
  popped = 0;
  #cells: Array<RingOp | undefined>;
  #head = 0;
  #tail = 0;

  constructor (capacity: number) {
    let n = 1;
    while (n < capacity) n *= 2;
    this.capacity = n;
    this.#cells = new Array(n);
  }

  get size (): number {
    return this.#tail - this.#head;
  }

  push (op: RingOp): boolean {
    if (this.#tail - this.#head >= this.capacity) {
      this.dropped++;
      return false;
    }
    this.#cells[this.#tail++ & (this.capacity - 1)] = op;
    return true;
  }

  pushKeys (opcode: number, pod: number, keys: ArrayLike<bigint>, timeBits: bigint, firstPosition: number, lease: number): number {
    let k = 0;
    for (; k < keys.length && this.size < this.capacity; k++) {
      this.#cells[this.#tail++ & (this.capacity - 1)] = { opcode, pod, key: keys[k], a: timeBits, b: BigInt(firstPosition + k), lease };
    }
    this.dropped += keys.length - k;
    return k;
  }

  pop (max: number): RingOp[] {
    const out: RingOp[] = [];
    while (out.length < max && this.#head < this.#tail) {
      const i = this.#head++ & (this.capacity - 1);
      out.push(this.#cells[i]!);
      this.#cells[i] = undefined;
    }
    this.popped += out.length;
    return out;
  }
}

/**
 * The consumer's rule (asm/ring-apply.ts): an op is applied only if its lease is its pod row's lease now
 * (`leaseOf`); the others are dropped. Splits popped ops into the two.
 */
export function applyLeased (ops: readonly RingOp[], leaseOf: (pod: number) => number): { applied: RingOp[]; stale: RingOp[] } {
  const applied: RingOp[] = [];
  const stale: RingOp[] = [];
  for (const op of ops) (op.lease === leaseOf(op.pod) ? applied : stale).push(op);
  return { applied, stale };
}
