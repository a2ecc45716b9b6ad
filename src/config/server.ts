// The `ear serve` listener and its client edge: where it listens, how big and how slow a request body may be, and
// how long SIGTERM waits for the requests in flight.
import { checkInt, checkString, type FieldCheck } from './checks.js';

export interface ServerConfig {
  host: string;
  port: number;
  /** Largest request body accepted, in bytes (413 above). */
  maxBodyBytes: number;
  /**
   * The whole request body must arrive within this long of its headers (ms), else 408 and the connection closes.
   * uWebSockets.js itself closes, unanswered, a body slower than about 16 KB/s; this bounds faster trickles too.
   */
  clientBodyTimeoutMs: number;
  /** How long SIGTERM waits for in-flight requests before closing them. */
  drainTimeoutMs: number;
}

export const SERVER_DEFAULTS: Readonly<ServerConfig> = Object.freeze({
  host: '0.0.0.0',
  port: 8080,
  maxBodyBytes: 32 << 20,
  clientBodyTimeoutMs: 30_000,
  drainTimeoutMs: 30_000
});

export const SERVER_FIELDS: Record<keyof ServerConfig, FieldCheck> = {
  host: checkString,
  port: (p, v) => checkInt(p, v, 0, 65535),
  maxBodyBytes: (p, v) => checkInt(p, v, 1024, 1 << 30),
  clientBodyTimeoutMs: (p, v) => checkInt(p, v, 100, 3_600_000),
  drainTimeoutMs: (p, v) => checkInt(p, v, 0, 3_600_000)
};
