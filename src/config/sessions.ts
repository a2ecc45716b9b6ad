// Sessions and explicit contexts: the session table's bound and idle expiry, where session state lives (this
// process, or Redis shared by replicas: src/store/shared-sessions.ts), and the bounds of POST /v1/context.
import { MAX_CONTEXT_TTL_SECONDS, parseSessionStoreSpec } from '../store/session-store.js';
import { ConfigError } from './config-error.js';
import { checkInt, type FieldCheck } from './checks.js';
import { MAX_SESSIONS, SESSION_IDLE_MS } from '../core/defaults.js';

export interface SessionsConfig {
  /** Session bound and idle expiry. */
  maxSessions: number;
  sessionIdleMs: number;
  /**
   * Where session state lives: `memory` (the local session table only) or `redis://HOST[:PORT][/DB]`, shared by
   * every replica that names the same server (src/store/shared-sessions.ts).
   */
  sessionStore: string;
  /** Longest wait for a shared store's reply (ms); past it the request goes on from the local table. */
  sessionStoreTimeoutMs: number;
  /** Explicit contexts (POST /v1/context) live at once in this gateway; at the bound a new one is refused (429). */
  maxContexts: number;
  /** A context's TTL when the client gives no ttl_seconds. */
  contextTtlSeconds: number;
}

export const SESSIONS_DEFAULTS: Readonly<SessionsConfig> = Object.freeze({
  maxSessions: MAX_SESSIONS,
  sessionIdleMs: SESSION_IDLE_MS,
  sessionStore: 'memory',
  sessionStoreTimeoutMs: 50,
  maxContexts: 100_000,
  contextTtlSeconds: 3600
});

export const SESSIONS_FIELDS: Record<keyof SessionsConfig, FieldCheck> = {
  maxSessions: (p, v) => checkInt(p, v, 16, 1 << 24),
  sessionIdleMs: (p, v) => checkInt(p, v, 1000, 86_400_000 * 7),
  sessionStore: (p, v) => {
    try {
      parseSessionStoreSpec(v, p);
    } catch (err) {
      throw new ConfigError(p, (err as Error).message.slice(`config ${p}: `.length));
    }
    return (v as string).trim();
  },
  sessionStoreTimeoutMs: (p, v) => checkInt(p, v, 1, 60_000),
  maxContexts: (p, v) => checkInt(p, v, 1, 1 << 24),
  contextTtlSeconds: (p, v) => checkInt(p, v, 1, MAX_CONTEXT_TTL_SECONDS)
};
