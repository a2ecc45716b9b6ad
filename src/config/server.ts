// The `ear serve` listener and its client edge: where it listens, how big a request head may be, how big and how
// slow a request body may be, and how long SIGTERM waits for the requests in flight.
import { availableParallelism } from 'node:os';
import { checkInt, checkString, type FieldCheck } from './checks.js';
import { cgroupCpuQuota } from './cpu-quota.js';

export interface ServerConfig {
  host: string;
  port: number;
  /** Largest request body accepted, in bytes (413 above). */
  maxBodyBytes: number;
  /**
   * Largest request head (request line and header lines) answered, in bytes (431 above). The pinned
   * uWebSockets.js reassembles a head split across TCP reads only up to 4096 bytes: above that one is served
   * only when it arrives in one read, and closed unanswered otherwise (docs/security.md "Request heads").
   */
  maxHeaderBytes: number;
  /**
   * The whole request body must arrive within this long of its headers (ms), else 408 and the connection closes.
   * uWebSockets.js itself closes, unanswered, a body slower than about 16 KB/s; this bounds faster trickles too.
   */
  clientBodyTimeoutMs: number;
  /** How long SIGTERM waits for in-flight requests before closing them. */
  drainTimeoutMs: number;
  /**
   * Data-plane threads of `ear serve`: 1, the main thread serves HTTP itself; N ≥ 2, N worker threads each listen
   * on the port and the main thread only decides (docs/architecture.md#n-data-plane-threads). `auto` in a file or
   * flag: the cores the process may use (affinity and cgroup CPU quota: autoHttpThreads), at most 64.
   */
  httpThreads: number;
}

export const SERVER_DEFAULTS: Readonly<ServerConfig> = Object.freeze({
  host: '0.0.0.0',
  port: 8080,
  maxBodyBytes: 32 << 20,
  maxHeaderBytes: 4096,
  clientBodyTimeoutMs: 30_000,
  drainTimeoutMs: 30_000,
  httpThreads: 1
});

export const SERVER_FIELDS: Record<keyof ServerConfig, FieldCheck> = {
  host: checkString,
  port: (p, v) => checkInt(p, v, 0, 65535),
  maxBodyBytes: (p, v) => checkInt(p, v, 1024, 1 << 30),
  // uWS reads at most 512 KiB at a time: a larger head never reaches a handler.
  maxHeaderBytes: (p, v) => checkInt(p, v, 1024, 512 << 10),
  clientBodyTimeoutMs: (p, v) => checkInt(p, v, 100, 3_600_000),
  drainTimeoutMs: (p, v) => checkInt(p, v, 0, 3_600_000),
  httpThreads: (p, v) => v === 'auto' ? autoHttpThreads() : checkInt(p, v, 1, 64)
};

/**
 * `httpThreads: auto`: one data-plane thread per core the process may use, at most 64: the cores its affinity allows
 * (os.availableParallelism), fewer where its cgroup's CPU quota (a container's CPU limit) allows fewer.
 */
export function autoHttpThreads (quota: number | null = cgroupCpuQuota()): number {
  return Math.max(1, Math.min(64, availableParallelism(), quota ?? Infinity));
}
