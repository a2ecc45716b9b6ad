// A progress line for long runs on stderr, at most one per interval: on a terminal it rewrites itself, in a
// log it appends.
export interface ProgressOptions {
  label: string;
  stream?: NodeJS.WritableStream & { isTTY?: boolean };
  /** Minimum milliseconds between two lines. */
  intervalMs?: number;
  /** Wall clock in ms (injectable for tests). */
  now?: () => number;
}

export class Progress {
  readonly #label: string;
  readonly #stream: NodeJS.WritableStream & { isTTY?: boolean };
  readonly #interval: number;
  readonly #now: () => number;
  readonly #start: number;
  #last = -Infinity;
  #printed = 0;

  constructor (o: ProgressOptions) {
    this.#label = o.label;
    this.#stream = o.stream ?? process.stderr;
    this.#interval = o.intervalMs ?? 1000;
    this.#now = o.now ?? (() => performance.now());
    this.#start = this.#now();
  }

  /** Lines written so far. */
  get printed (): number { return this.#printed; }

  /** `done` of `total` units (e.g. virtual seconds, requests); `detail` is appended as is. */
  update (done: number, total: number, detail = ''): void {
    const now = this.#now();
    if (now - this.#last < this.#interval) return;
    this.#last = now;
    this.#write(this.#line(done, total, detail, now), false);
  }

  finish (detail = ''): void {
    const now = this.#now();
    this.#write(`[${this.#label}] done in ${((now - this.#start) / 1000).toFixed(1)}s${detail === '' ? '' : ` ${detail}`}`, true);
  }

  #line (done: number, total: number, detail: string, now: number): string {
    const elapsed = (now - this.#start) / 1000;
    const frac = total > 0 ? Math.min(1, done / total) : 0;
    const left = frac > 0 ? elapsed * (1 - frac) / frac : NaN;
    return `[${this.#label}] ${(frac * 100).toFixed(1)}% ${done}/${total} ${elapsed.toFixed(1)}s elapsed` +
      `${Number.isFinite(left) ? `, ~${left.toFixed(0)}s left` : ''}${detail === '' ? '' : ` ${detail}`}`;
  }

  #write (line: string, final: boolean): void {
    this.#printed++;
    if (this.#stream.isTTY === true) this.#stream.write(`\r\x1b[2K${line}${final ? '\n' : ''}`);
    else this.#stream.write(`${line}\n`);
  }
}
