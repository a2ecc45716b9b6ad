// The backends the gateway proxies to: one keep-alive UpstreamPool each for the proxied requests, their health,
// the models they serve and the load their engines report (probes and scrapes go through undici). Health checks eject a backend after `unhealthyAfter` failures in a row and
// re-admit it on the first success; the model list comes from each engine's /v1/models.
import { request as undiciRequest } from 'undici';
import type { BackendConfig, GatewayConfig } from '../config/index.js';
import { parseEngineMetrics, parseProcessStartTime, type EngineLoad } from './engine-metrics.js';
import { UpstreamPool } from '../upstream/pool.js';
import { backendHeaders } from '../upstream/headers.js';

export type BackendHealth = 'unknown' | 'healthy' | 'unhealthy';

export class Backend {
  readonly pool: UpstreamPool;
  health: BackendHealth = 'unknown';
  /** Set by a config reload that removed it: serves nothing new, closes once idle. */
  draining = false;
  failures = 0;
  models = new Set<string>();
  /** Each listed model's max_model_len as the engine's /v1/models reports it (vLLM, ear sim); absent: not reported. */
  maxModelLen = new Map<string, number>();
  engineLoad: EngineLoad | null = null;
  lastScrape = 0;
  /** The engine process's start time (its /metrics process_start_time_seconds), null until read. */
  startTime: number | null = null;
  /** Times a scrape found a new start time: the engine restarted. */
  restarts = 0;
  /** Requests this gateway has in flight on it (a draining backend closes when this reaches 0). */
  inFlight = 0;
  /** Drained and closed: its pod row is released (or being released) for another backend. */
  gone = false;

  constructor (readonly index: number, readonly config: BackendConfig, gw: Readonly<GatewayConfig>) {
    this.pool = new UpstreamPool(config.url, {
      connections: gw.connectionsPerBackend,
      maxQueued: gw.upstreamMaxQueued,
      headersTimeoutMs: gw.upstreamHeadersTimeoutMs,
      bodyTimeoutMs: gw.upstreamBodyTimeoutMs,
      headers: backendHeaders(config.apiKey)
    });
  }

  get id (): string {
    return this.config.id;
  }

  /** Usable for new requests of `model`. */
  serves (model: string): boolean {
    return this.health === 'healthy' && !this.draining && this.models.has(model);
  }
}

const PROBE_TIMEOUT_MS = 2000;

async function getText (b: Backend, path: string): Promise<{ status: number; text: string }> {
  // The engine's key too: vLLM's --api-key guards /v1/models.
  const r = await undiciRequest(`${b.config.url}${path}`, { method: 'GET', headers: Object.fromEntries(backendHeaders(b.config.apiKey)), headersTimeout: PROBE_TIMEOUT_MS, bodyTimeout: PROBE_TIMEOUT_MS });
  return { status: r.statusCode, text: await r.body.text() };
}

/** One health probe: /health, then /v1/models for the model list. Updates the backend; returns whether it is up. */
export async function probe (b: Backend, unhealthyAfter: number): Promise<boolean> {
  try {
    const h = await getText(b, '/health');
    if (h.status !== 200) throw new Error(`/health answered ${h.status}`);
    const m = await getText(b, '/v1/models');
    if (m.status === 200) {
      const doc = JSON.parse(m.text) as { data?: Array<{ id?: unknown; max_model_len?: unknown }> };
      const listed = (doc.data ?? []).filter((x): x is { id: string; max_model_len?: unknown } => typeof x?.id === 'string');
      if (listed.length > 0) {
        b.models = new Set(listed.map((x) => x.id));
        b.maxModelLen = new Map(listed.flatMap((x) => Number.isSafeInteger(x.max_model_len) && (x.max_model_len as number) > 0 ? [[x.id, x.max_model_len as number]] : []));
      }
    }
    b.failures = 0;
    b.health = 'healthy';
    return true;
  } catch {
    b.failures++;
    if (b.failures >= unhealthyAfter || b.health === 'unknown') b.health = 'unhealthy';
    return false;
  }
}

/**
 * Polls the engine's /metrics into engineLoad; a failure leaves the last reading (its age is lastScrape). Returns
 * whether the engine restarted since the last scrape that read its start time (a different process start time).
 */
export async function scrape (b: Backend, now: number): Promise<boolean> {
  try {
    const r = await getText(b, '/metrics');
    if (r.status !== 200) return false;
    const load = parseEngineMetrics(r.text);
    if (load) {
      b.engineLoad = load;
      b.lastScrape = now;
    }
    const started = parseProcessStartTime(r.text);
    if (started === null) return false;
    const restarted = b.startTime !== null && started !== b.startTime;
    b.startTime = started;
    if (restarted) b.restarts++;
    return restarted;
  } catch {
    // an engine that cannot answer /metrics is judged by the health check, not here
    return false;
  }
}
