// How EAR talks to its backends: connections and queueing per backend, timeouts, retries, health checks and the
// engines' /metrics poll.
import { checkInt, type FieldCheck } from './checks.js';
import { METRICS_INTERVAL_MS } from '../core/defaults.js';

export interface UpstreamConfig {
  /** Upstream attempts for one request: the first plus retries on connect errors / 5xx before any byte reached the client. */
  maxAttempts: number;
  /** Times a stream cut after its first byte goes on on another engine (docs/resume.md); 0: a cut ends it with an error event. */
  maxResumes: number;
  /** The most bytes of a stream kept to resume it from; a longer stream that is cut ends with an error event. */
  maxResumeBytes: number;
  /** Health check period (ms); a backend failing `unhealthyAfter` checks in a row is ejected, re-admitted on a success. */
  healthIntervalMs: number;
  unhealthyAfter: number;
  /** Engine /metrics poll period (ms); 0 disables polling. */
  metricsIntervalMs: number;
  /** Upstream timeouts (ms): headers (time to first byte) and body (gap between chunks). */
  upstreamHeadersTimeoutMs: number;
  upstreamBodyTimeoutMs: number;
  /** Keep-alive connections per backend. */
  connectionsPerBackend: number;
  /** Requests that may wait for one of a backend's connections; beyond, the request tries another backend (or 503). */
  upstreamMaxQueued: number;
}

export const UPSTREAM_DEFAULTS: Readonly<UpstreamConfig> = Object.freeze({
  maxAttempts: 3,
  maxResumes: 1,
  maxResumeBytes: 4 << 20,
  healthIntervalMs: 2000,
  unhealthyAfter: 2,
  metricsIntervalMs: METRICS_INTERVAL_MS,
  upstreamHeadersTimeoutMs: 600_000,
  upstreamBodyTimeoutMs: 600_000,
  connectionsPerBackend: 128,
  upstreamMaxQueued: 4096
});

export const UPSTREAM_FIELDS: Record<keyof UpstreamConfig, FieldCheck> = {
  maxAttempts: (p, v) => checkInt(p, v, 1, 10),
  maxResumes: (p, v) => checkInt(p, v, 0, 10),
  maxResumeBytes: (p, v) => checkInt(p, v, 1024, 1 << 30),
  healthIntervalMs: (p, v) => checkInt(p, v, 50, 3_600_000),
  unhealthyAfter: (p, v) => checkInt(p, v, 1, 100),
  metricsIntervalMs: (p, v) => checkInt(p, v, 0, 3_600_000),
  upstreamHeadersTimeoutMs: (p, v) => checkInt(p, v, 100, 86_400_000),
  upstreamBodyTimeoutMs: (p, v) => checkInt(p, v, 100, 86_400_000),
  connectionsPerBackend: (p, v) => checkInt(p, v, 1, 10_000),
  upstreamMaxQueued: (p, v) => checkInt(p, v, 1, 1 << 20)
};
