// Maps the prefix index's pages ahead of its readers, a slice at a time on the kv-events thread. The index is
// hundreds of MiB of address space (256 MiB of slots by default) that the kernel maps on first touch. A route's
// walk that reads a page nothing touched yet (an absent block's home slot, or the slots it prefetches past the
// match) takes the page fault on the request path: ~30 µs each on a loaded 2-core VM, ~40 of them in a turn of an
// agentic-sized session (1.2 ms of its main thread; the same walk run again took 9 µs). Reading one word a page
// maps it to the kernel's zero page: no memory until the writer stores there.
import type { Region } from '../core/region.js';
import type { PrefixIndex } from '../core/prefix-index.js';

const PAGE_WORDS = 4096 / 4;

export class IndexWarmer {
  readonly #u32: Uint32Array;
  #next: number;
  readonly #end: number;
  /** What the reads saw, kept so that they are not optimized away. */
  #sum = 0;

  constructor (region: Region, index: PrefixIndex) {
    this.#u32 = region.u32;
    this.#next = index.base >>> 2;
    const slotBytes = index.stats().slots * region.const('IX_ENTRY_BYTES');
    this.#end = (index.base + region.const('IX_HEADER_BYTES') + slotBytes) >>> 2;
  }

  get done (): boolean {
    return this.#next >= this.#end;
  }

  /** Reads one word of each page until `deadline` (performance.now()) passes; false once every page was read. */
  step (deadline: number): boolean {
    const u32 = this.#u32;
    let i = this.#next;
    let sum = this.#sum;
    while (i < this.#end) {
      // 64 pages between clock reads: a fault costs µs, a clock read less.
      for (const stop = Math.min(this.#end, i + 64 * PAGE_WORDS); i < stop; i += PAGE_WORDS) sum = (sum + u32[i]) | 0;
      if (performance.now() >= deadline) break;
    }
    this.#next = i;
    this.#sum = sum;
    return i < this.#end;
  }
}
