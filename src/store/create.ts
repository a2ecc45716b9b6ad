// One SessionStore from `--session-store` (parsed by parseSessionStoreSpec): `memory` or `redis://HOST:PORT[/DB]`.
import { MemoryStore, type MemoryStoreOptions } from './memory-store.js';
import { RedisStore, type RedisStoreOptions } from './redis-store.js';
import type { SessionStore, SessionStoreSpec, StoreLogger } from './session-store.js';

export interface CreateStoreOptions {
  /** Idle time after which a session ends (ms): the gateway's sessionIdleMs. */
  sessionTtlMs?: number;
  /** memory: the gateway's maxSessions. */
  maxSessions?: number;
  logger?: StoreLogger;
  /** Anything else either implementation takes (prefix, commandTimeoutMs, clock, …). */
  memory?: Omit<MemoryStoreOptions, 'sessionTtlMs' | 'maxSessions'>;
  redis?: Omit<RedisStoreOptions, 'host' | 'port' | 'db' | 'sessionTtlMs' | 'logger'>;
}

export function createSessionStore (spec: SessionStoreSpec, opts: CreateStoreOptions = {}): SessionStore {
  if (spec.kind === 'memory') return new MemoryStore({ ...opts.memory, sessionTtlMs: opts.sessionTtlMs, maxSessions: opts.maxSessions });
  return new RedisStore({ ...opts.redis, host: spec.host, port: spec.port, db: spec.db, sessionTtlMs: opts.sessionTtlMs, logger: opts.logger });
}
