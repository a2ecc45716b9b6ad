// The part of autocannon's programmatic API the benchmarks use (the package ships no types).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  interface Options {
    url: string;
    method?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    connections?: number;
    pipelining?: number;
    duration?: number;
    timeout?: number;
    /** A response whose body differs counts as a mismatch. */
    expectBody?: string;
  }

  interface Histogram {
    average: number;
    p50: number;
    p99: number;
    total: number;
  }

  interface Result {
    duration: number;
    requests: Histogram;
    latency: Histogram;
    errors: number;
    timeouts: number;
    mismatches: number;
    non2xx: number;
    resets: number;
    '2xx': number;
  }

  interface Instance extends EventEmitter, PromiseLike<Result> {
    on (event: 'response', listener: (client: unknown, statusCode: number, resBytes: number, responseTimeMs: number) => void): this;
    on (event: string, listener: (...args: any[]) => void): this;
    stop (): void;
  }

  function autocannon (opts: Options): Instance;
  export default autocannon;
}
