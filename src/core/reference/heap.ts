// Plain TypeScript admission heap with the semantics of asm/heap.ts: min by (priority, arrival), dense job ids
// with a position map, bounded (a push while `limit` jobs wait is refused and counted). Test oracle and bench baseline.

export class ReferenceHeap {
  readonly capacity: number;
  limit: number;
  rejected = 0;
  pushed = 0;
  #prio: Float64Array;
  #seq: Float64Array;   // arrival numbers stay exact in a double up to 2^53
  #job: Int32Array;
  #pos: Int32Array;
  #size = 0;
  #nextSeq = 0;

  constructor (capacity: number) {
    this.capacity = capacity;
    this.limit = capacity;
    this.#prio = new Float64Array(capacity);
    this.#seq = new Float64Array(capacity);
    this.#job = new Int32Array(capacity);
    this.#pos = new Int32Array(capacity).fill(-1);
  }

  get size (): number {
    return this.#size;
  }

  #before (pa: number, sa: number, pb: number, sb: number): boolean {
    return pa < pb || (pa === pb && sa < sb);
  }

  #put (i: number, p: number, s: number, j: number): void {
    this.#prio[i] = p;
    this.#seq[i] = s;
    this.#job[i] = j;
    this.#pos[j] = i;
  }

  #up (i: number, p: number, s: number, j: number): void {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#before(p, s, this.#prio[parent], this.#seq[parent])) break;
      this.#put(i, this.#prio[parent], this.#seq[parent], this.#job[parent]);
      i = parent;
    }
    this.#put(i, p, s, j);
  }

  #down (i: number, p: number, s: number, j: number): void {
    const n = this.#size;
    for (;;) {
      let c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && this.#before(this.#prio[c + 1], this.#seq[c + 1], this.#prio[c], this.#seq[c])) c++;
      if (!this.#before(this.#prio[c], this.#seq[c], p, s)) break;
      this.#put(i, this.#prio[c], this.#seq[c], this.#job[c]);
      i = c;
    }
    this.#put(i, p, s, j);
  }

  /** 1 queued, 0 full (counted), −1 bad id, already queued or NaN. */
  push (job: number, priority: number): number {
    if (!(job >= 0 && job < this.capacity) || Number.isNaN(priority) || this.#pos[job] >= 0) return -1;
    if (this.#size >= this.limit) {
      this.rejected++;
      return 0;
    }
    this.#size++;
    this.#up(this.#size - 1, priority, this.#nextSeq++, job);
    this.pushed++;
    return 1;
  }

  peek (): number {
    return this.#size === 0 ? -1 : this.#job[0];
  }

  priority (job: number): number | undefined {
    const i = this.#pos[job] ?? -1;
    return i < 0 ? undefined : this.#prio[i];
  }

  #removeAt (i: number): void {
    const p = this.#prio[i];
    const s = this.#seq[i];
    this.#pos[this.#job[i]] = -1;
    const n = --this.#size;
    if (i === n) return;
    if (this.#before(this.#prio[n], this.#seq[n], p, s)) this.#up(i, this.#prio[n], this.#seq[n], this.#job[n]);
    else this.#down(i, this.#prio[n], this.#seq[n], this.#job[n]);
  }

  popMin (): number {
    if (this.#size === 0) return -1;
    const j = this.#job[0];
    this.#removeAt(0);
    return j;
  }

  changePriority (job: number, priority: number): number {
    if (Number.isNaN(priority)) return -1;
    const i = this.#pos[job] ?? -1;
    if (i < 0) return 0;
    if (priority < this.#prio[i]) this.#up(i, priority, this.#seq[i], job);
    else this.#down(i, priority, this.#seq[i], job);
    return 1;
  }

  remove (job: number): number {
    const i = this.#pos[job] ?? -1;
    if (i < 0) return 0;
    this.#removeAt(i);
    return 1;
  }
}
